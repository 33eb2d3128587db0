# Reconstructed after hazdzz/stgcn issue #18 ("confusion about scheduler.step()", closed after the maintainer's fix commit 6d62052 "Update main.py", https://github.com/hazdzz/stgcn/issues/18): train() in main.py called scheduler.step() inside the mini-batch loop, right after optimizer.step(), although the StepLR scheduler built in prepare_model() is configured in epochs (step_size=10, gamma=0.95 by default), so the learning rate was multiplied by 0.95 every 10 *batches* and decayed to almost zero within the first epochs. The fix moves scheduler.step() out of the batch loop to once per epoch.
# Fixed version (the merged PR applied).
import argparse

import torch
import torch.nn as nn
import torch.optim as optim
import tqdm

from script import earlystopping
from model import models


def get_parameters():
    parser = argparse.ArgumentParser(description='STGCN')
    parser.add_argument('--lr', type=float, default=0.001, help='learning rate')
    parser.add_argument('--weight_decay_rate', type=float, default=0.001, help='weight decay (L2 penalty)')
    parser.add_argument('--batch_size', type=int, default=32)
    parser.add_argument('--epochs', type=int, default=10000, help='epochs, default as 10000')
    parser.add_argument('--opt', type=str, default='adam', help='optimizer, default as adam')
    parser.add_argument('--step_size', type=int, default=10)
    parser.add_argument('--gamma', type=float, default=0.95)
    parser.add_argument('--patience', type=int, default=30, help='early stopping patience')
    parser.add_argument('--graph_conv_type', type=str, default='cheb_graph_conv')
    return parser.parse_args()


def prepare_model(args, blocks, n_vertex, device):
    loss = nn.MSELoss()
    es = earlystopping.EarlyStopping(mode='min', min_delta=0.0, patience=args.patience)

    if args.graph_conv_type == 'cheb_graph_conv':
        model = models.STGCNChebGraphConv(args, blocks, n_vertex).to(device)
    else:
        model = models.STGCNGraphConv(args, blocks, n_vertex).to(device)

    if args.opt == "rmsprop":
        optimizer = optim.RMSprop(model.parameters(), lr=args.lr, weight_decay=args.weight_decay_rate)
    elif args.opt == "adam":
        optimizer = optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay_rate, amsgrad=False)
    elif args.opt == "adamw":
        optimizer = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay_rate, amsgrad=False)
    else:
        raise NotImplementedError(f'ERROR: The optimizer {args.opt} is not implemented.')

    scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=args.step_size, gamma=args.gamma)

    return loss, es, model, optimizer, scheduler


def train(loss, args, optimizer, scheduler, es, model, train_iter, val_iter):
    for epoch in range(args.epochs):
        l_sum, n = 0.0, 0  # 'l_sum' is epoch sum loss, 'n' is epoch instance number
        model.train()
        for x, y in tqdm.tqdm(train_iter):
            y_pred = model(x).view(len(x), -1)  # [batch_size, num_nodes]
            l = loss(y_pred, y)
            optimizer.zero_grad()
            l.backward()
            optimizer.step()
            l_sum += l.item() * y.shape[0]
            n += y.shape[0]
        scheduler.step()  # not: TB???
        val_loss = val(model, val_iter, loss)
        # GPU memory usage
        gpu_mem_alloc = torch.cuda.max_memory_allocated() / 1000000 if torch.cuda.is_available() else 0
        print('Epoch: {:03d} | Lr: {:.20f} |Train loss: {:.6f} | Val loss: {:.6f} | GPU occupy: {:.6f} MiB'.
              format(epoch + 1, optimizer.param_groups[0]['lr'], l_sum / n, val_loss, gpu_mem_alloc))

        if es.step(val_loss):
            print('Early stopping.')
            break


@torch.no_grad()
def val(model, val_iter, loss):
    model.eval()
    l_sum, n = 0.0, 0
    for x, y in val_iter:
        y_pred = model(x).view(len(x), -1)
        l = loss(y_pred, y)
        l_sum += l.item() * y.shape[0]
        n += y.shape[0]
    return torch.tensor(l_sum / n)


def run(blocks, n_vertex, train_iter, val_iter, device):
    args = get_parameters()
    loss, es, model, optimizer, scheduler = prepare_model(args, blocks, n_vertex, device)
    train(loss, args, optimizer, scheduler, es, model, train_iter, val_iter)
    return model
