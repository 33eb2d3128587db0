import torch


def train_one_epoch(epoch, model, loader, optimizer, loss_fn, args, lr_scheduler=None, loss_scaler=None,
                    model_ema=None, mixup_fn=None):
    model.train()
    num_updates = epoch * len(loader)
    for batch_idx, (input, target) in enumerate(loader):
        if mixup_fn is not None:
            input, target = mixup_fn(input, target)
        with torch.autocast("cuda"):
            output = model(input)
            loss = loss_fn(output, target)
        optimizer.zero_grad()
        if loss_scaler is not None:
            loss_scaler(loss, optimizer, clip_grad=args.clip_grad, parameters=model.parameters())
        else:
            loss.backward()
            if args.clip_grad is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad)
            optimizer.step()
        if model_ema is not None:
            model_ema.update(model)
        num_updates += 1
        if lr_scheduler is not None:
            lr_scheduler.step_update(num_updates=num_updates)


def validate(model, loader, loss_fn):
    model.eval()
    with torch.no_grad():
        for input, target in loader:
            output = model(input)
            loss = loss_fn(output, target)
    return loss.item()
