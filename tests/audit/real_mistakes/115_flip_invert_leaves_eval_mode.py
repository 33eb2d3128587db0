# Reconstructed after KaiyuanZh/FLIP issue #6 ("Missing switch back to train() mode": the model is set to eval()
# "but is never reverted to train() as it should be, since the model is still in the process of training"; the
# maintainer: "I have fixed it"): the CIFAR script switched the classifier to eval mode to invert triggers with it
# inside the training loop, then went on training it.
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
    model.train()
    for epoch in range(epochs):
        for images, labels in train_loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images), labels)  # also-ok: TB202
            loss.backward()
            optimizer.step()
        if epoch % invert_every == 0:
            model.eval()  # expect: TB202
            images, labels = next(iter(train_loader))
            invert_trigger(model, images, labels)
