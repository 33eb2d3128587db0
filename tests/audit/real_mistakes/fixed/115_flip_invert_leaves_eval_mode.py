# Fixed version of ../115_flip_invert_leaves_eval_mode.py: silent on the codes that file expects.
import torch
import torch.nn.functional as F


def invert_trigger(model, images, target, steps=20):
    mask = torch.zeros_like(images[:1], requires_grad=True)
    opt = torch.optim.Adam([mask], lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(model(images * (1 - mask) + mask), target).backward()
        opt.step()
    return mask.detach()


def train(model, train_loader, optimizer, epochs, invert_every):
    for epoch in range(epochs):
        model.train()
        for images, labels in train_loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
        if epoch % invert_every == 0:
            model.eval()  # not: TB202
            images, labels = next(iter(train_loader))
            invert_trigger(model, images, labels)
