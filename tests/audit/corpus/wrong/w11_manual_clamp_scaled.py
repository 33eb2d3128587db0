import torch


def train(net, loader, loss_fn, optimizer):
    grad_scaler = torch.amp.GradScaler("cuda")
    net.train()
    for batch_idx, (data, target) in enumerate(loader):
        optimizer.zero_grad()
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            output = net(data)
            loss = loss_fn(output, target)
        grad_scaler.scale(loss).backward()
        for p in net.parameters():
            if p.grad is not None:
                p.grad.data.clamp_(-1.0, 1.0)  # expect: TB106
        grad_scaler.step(optimizer)
        grad_scaler.update()
