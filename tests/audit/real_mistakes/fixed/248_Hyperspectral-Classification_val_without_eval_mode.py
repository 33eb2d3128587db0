# Reconstructed after eecn/Hyperspectral-Classification issue #21 ("在validation阶段为什么不使用model.eval()" / why is model.eval() not used in the validation phase, confirmed by the maintainer and fixed in commit 1a5f616 "Change model to eval mode before running inference", https://github.com/eecn/Hyperspectral-Classification/issues/21): in models.py, train() calls val(net, val_loader, ...) after every epoch to get the validation accuracy that drives ReduceLROnPlateau and the saved checkpoint names, but val() only wrapped the forward in torch.no_grad() and left the network in train mode, so dropout and BatchNorm batch statistics (e.g. in the Baseline, LeeEtAl, ChenEtAl, HeEtAl, SharmaEtAl, LiuEtAl and MouEtAl models) were active while measuring validation accuracy. The fix adds net.eval() at the start of val().
# Fixed version (the merged PR applied).
import numpy as np
import torch
import torch.optim as optim
from tqdm import tqdm

from utils import camel_to_snake
from models_io import save_model


def train(net, optimizer, criterion, data_loader, epoch, scheduler=None,
          display_iter=100, device=torch.device('cpu'), val_loader=None,
          supervision='full'):
    """
    Training loop to optimize a network for several epochs and a specified loss
    """
    if criterion is None:
        raise Exception("Missing criterion. You must specify a loss function.")

    net.to(device)
    save_epoch = epoch // 20 if epoch > 20 else 1

    losses = np.zeros(1000000)
    mean_losses = np.zeros(100000000)
    iter_ = 1
    val_accuracies = []

    for e in tqdm(range(1, epoch + 1), desc="Training the network"):
        # Set the network to training mode
        net.train()
        avg_loss = 0.

        # Run the training loop for one epoch
        for batch_idx, (data, target) in tqdm(enumerate(data_loader), total=len(data_loader)):
            # Load the data into the GPU if required
            data, target = data.to(device), target.to(device)

            optimizer.zero_grad()
            if supervision == 'full':
                output = net(data)
                loss = criterion(output, target)
            elif supervision == 'semi':
                outs = net(data)
                output, rec = outs
                loss = criterion[0](output, target) + net.aux_loss_weight * criterion[1](rec, data)
            else:
                raise ValueError("supervision mode \"{}\" is unknown.".format(supervision))
            loss.backward()
            optimizer.step()

            avg_loss += loss.item()
            losses[iter_] = loss.item()
            mean_losses[iter_] = np.mean(losses[max(0, iter_ - 100):iter_ + 1])

            if display_iter and iter_ % display_iter == 0:
                string = 'Train (epoch {}/{}) [{}/{} ({:.0f}%)]\tLoss: {:.6f}'
                string = string.format(
                    e, epoch, batch_idx * len(data), len(data) * len(data_loader),
                    100. * batch_idx / len(data_loader), mean_losses[iter_])
                tqdm.write(string)
            iter_ += 1
            del(data, target, loss, output)

        # Update the scheduler
        avg_loss /= len(data_loader)
        if val_loader is not None:
            val_acc = val(net, val_loader, device=device, supervision=supervision)
            val_accuracies.append(val_acc)
            metric = -val_acc
        else:
            metric = avg_loss

        if isinstance(scheduler, optim.lr_scheduler.ReduceLROnPlateau):
            scheduler.step(metric)
        elif scheduler is not None:
            scheduler.step()

        # Save the weights
        if e % save_epoch == 0:
            save_model(net, camel_to_snake(str(net.__class__.__name__)),
                       data_loader.dataset.name, epoch=e, metric=abs(metric))


def val(net, data_loader, device='cpu', supervision='full'):
    # TODO : fix me using metrics()
    net.eval()
    accuracy, total = 0., 0.
    ignored_labels = data_loader.dataset.ignored_labels
    for batch_idx, (data, target) in enumerate(data_loader):
        with torch.no_grad():
            # Load the data into the GPU if required
            data, target = data.to(device), target.to(device)
            if supervision == 'full':
                output = net(data)  # not: TB201
            elif supervision == 'semi':
                outs = net(data)
                output, rec = outs
            _, output = torch.max(output, dim=1)
            for pred, out in zip(output.view(-1), target.view(-1)):
                if out.item() in ignored_labels:
                    continue
                else:
                    accuracy += out.item() == pred.item()
                    total += 1
    return accuracy / total
