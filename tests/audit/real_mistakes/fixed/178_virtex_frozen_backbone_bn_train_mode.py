# Reconstructed after kdexd/virtex issue #16 ("BatchNormalization's Running Stats are Accumulated in ImageNet Linear Evaluation", closed, https://github.com/kdexd/virtex/issues/16): scripts/clf_linear.py froze every backbone parameter except fc (requires_grad=False) for linear evaluation but kept the model in train() mode (and called model.train() again after each validation), so BatchNorm running mean/var of the "frozen" backbone kept being updated. The maintainer kdexd: "This is indeed a bug that crept in very sneakily!"; fixed in commit e2c1816 ("Fix #16"): model.eval() when FROZEN, and model.train() after validation only when fine-tuning end-to-end.
# Fixed version (maintainer commit e2c1816 applied).
import torch
import torch.nn as nn


def main(_A, _DOWNC, pretrained_model, train_dataloader_iter, val_dataloader, device,
         OptimizerFactory, LRSchedulerFactory, NUM_CLASSES):
    model = pretrained_model.visual.cnn
    model.fc = nn.Linear(_DOWNC.MODEL.VISUAL.FEATURE_SIZE, NUM_CLASSES).to(device)
    model = model.to(device)

    torch.nn.init.normal_(model.fc.weight.data, mean=0.0, std=0.01)
    torch.nn.init.constant_(model.fc.bias.data, 0.0)

    # Freeze all layers except FC as per config param.
    if _DOWNC.MODEL.VISUAL.FROZEN:
        # Set model to eval mode to prevent BatchNorm from updating running
        # mean and std.
        model.eval()  # not: TB???

        for name, param in model.named_parameters():
            if "fc" not in name:
                param.requires_grad = False

    criterion = nn.CrossEntropyLoss()
    optimizer = OptimizerFactory.from_config(_DOWNC, model.named_parameters())
    scheduler = LRSchedulerFactory.from_config(_DOWNC, optimizer)

    for iteration in range(1, _DOWNC.OPTIM.NUM_ITERATIONS + 1):
        optimizer.zero_grad()
        batch = next(train_dataloader_iter)

        logits = model(batch["image"])
        loss = criterion(logits, batch["label"])
        loss.backward()

        optimizer.step()
        scheduler.step(iteration)

        if iteration % _A.checkpoint_every == 0:
            torch.set_grad_enabled(False)
            model.eval()

            total_val_loss = torch.tensor(0.0).to(device)
            for val_iteration, batch in enumerate(val_dataloader, start=1):
                for key in batch:
                    batch[key] = batch[key].to(device)
                logits = model(batch["image"])
                loss = criterion(logits, batch["label"])
                total_val_loss += loss
            total_val_loss = total_val_loss / val_iteration

            torch.set_grad_enabled(True)
            # Set model back to train mode only when fine-tuning end-to-end.
            if not _DOWNC.MODEL.VISUAL.FROZEN:
                model.train()
