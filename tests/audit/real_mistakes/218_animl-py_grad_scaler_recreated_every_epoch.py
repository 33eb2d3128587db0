# Reconstructed after conservationtechlab/animl-py issue #298 ("GradScaler should be initialized once, not per epoch", closed-as-fixed, labelled bug, https://github.com/conservationtechlab/animl-py/issues/298) / PR #304 ("fix: gradscaler initialization", merged, https://github.com/conservationtechlab/animl-py/pull/304): in src/animl/train.py the mixed-precision GradScaler was constructed inside train_func(), which train_main() calls once per epoch, so every epoch started again from the default initial loss scale and the dynamic scale learned during the previous epoch (and its growth tracker) was thrown away; it was also never checkpointed. The merged fix creates the GradScaler once in the training entry point before the epoch loop, passes it into train_func, and saves/loads its state dict with the classifier checkpoint.
import torch
import torch.nn as nn
from tqdm import trange
from torch.amp import autocast, GradScaler

from animl.classification import save_classifier


def train_func(data_loader, model, optimizer, scheduler, device='cpu',
               mixed_precision=False, progress=True):
    model.to(device)
    model.train()

    criterion = nn.CrossEntropyLoss()

    loss_total, oa_total = 0.0, 0.0

    if progress:
        progressBar = trange(len(data_loader))

    if mixed_precision and device != 'cpu' and torch.cuda.is_available():
        scaler = GradScaler('cuda', enabled=True)  # expect: TB121

    for idx, batch in enumerate(data_loader):
        data = batch[0]
        labels = batch[1]
        data, labels = data.to(device), labels.to(device)
        optimizer.zero_grad()

        if mixed_precision and device != 'cpu' and torch.cuda.is_available():
            with autocast(device_type='cuda', dtype=torch.float16):
                prediction = model(data)
                loss = criterion(prediction, labels)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            scaler.step(optimizer)
            scaler.update()
        else:
            prediction = model(data)
            loss = criterion(prediction, labels)
            loss.backward()
            optimizer.step()

        loss_total += loss.item()

        pred_label = torch.argmax(prediction, dim=1)

        oa = torch.mean((pred_label == labels).float())
        oa_total += oa.item()

        if progress:
            progressBar.set_description(
                '[Train] Loss: {:.2f}; OA: {:.2f}%'.format(
                    loss_total/(idx+1),
                    100*oa_total/(idx+1)
                )
            )
            progressBar.update(1)

    scheduler.step()
    if progress:
        progressBar.close()
    loss_total /= len(data_loader)
    oa_total /= len(data_loader)

    return loss_total, oa_total


def train_loop(cfg, model, optim, scheduler, dl_train, dl_val, validate_func,
               current_epoch, device, mixed_precision, progress):
    numEpochs = cfg['num_epochs']
    frozen_epochs = cfg.get('frozen_epochs', 1)
    best_val_loss = float('inf')

    while current_epoch < numEpochs:
        current_epoch += 1
        print(f'Epoch {current_epoch}/{numEpochs}')
        print(f"Using learning rate : {scheduler.get_last_lr()[0]}")

        if current_epoch > frozen_epochs:
            for param in model.parameters():
                param.requires_grad = True

        loss_train, oa_train = train_func(dl_train, model, optim, scheduler, device,
                                          mixed_precision=mixed_precision, progress=progress)
        loss_val, oa_val, precision, recall = validate_func(dl_val, model, device, progress=progress)

        stats = {
            'loss_train': loss_train,
            'loss_val': loss_val,
            'oa_train': oa_train,
            'oa_val': oa_val,
            'precision': precision,
            'recall': recall
        }

        if current_epoch % cfg.get('checkpoint_frequency', 10) == 0:
            save_classifier(model, cfg['experiment_folder'], current_epoch, stats, optim, scheduler)

        if loss_val < best_val_loss:
            best_val_loss = loss_val
            save_classifier(model, cfg['experiment_folder'], 'best', stats)

        save_classifier(model, cfg['experiment_folder'], 'last', stats)
