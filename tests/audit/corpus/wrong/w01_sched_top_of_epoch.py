import torch
from tqdm import tqdm


def run_training(net, trainloader, criterion, n_epochs=90):
    optim = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    lr_sched = torch.optim.lr_scheduler.MultiStepLR(optim, milestones=[30, 60], gamma=0.1)
    for ep in range(n_epochs):
        lr_sched.step()  # expect: TB101
        net.train()
        for inputs, labels in tqdm(trainloader, desc=f"epoch {ep}"):
            optim.zero_grad()
            loss = criterion(net(inputs), labels)
            loss.backward()
            optim.step()
