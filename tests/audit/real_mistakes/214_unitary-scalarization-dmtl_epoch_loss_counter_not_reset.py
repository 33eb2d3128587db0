# Reconstructed after yobibyte/unitary-scalarization-dmtl PR #2 ("fix n_iter reset", merged, https://github.com/yobibyte/unitary-scalarization-dmtl/pull/2): in supervised_experiments/train_multi_task.py the batch counter n_iter was initialised once before the epoch loop while losses_per_epoch was reset at every epoch, so the logged per-epoch training loss losses_per_epoch[t] / n_iter (and the norm_sum_grads statistic) was divided by the cumulative number of iterations since the start of training and shrank artificially from epoch to epoch. The maintainer merged the one-line fix that resets n_iter = 0 at the start of each epoch, thanked the contributor and updated plots in the paper.
from timeit import default_timer as timer
import torch
import wandb

import supervised_experiments.losses as losses_f
import supervised_experiments.datasets as datasets
import supervised_experiments.metrics as metrics
import supervised_experiments.model_selector as model_selector
from supervised_experiments.utils import create_logger
from optimizers.baselines import Baseline


def train_multi_task(args, configs, DEVICE='cuda'):
    logger = create_logger('Main')
    train_loader, val_loader = datasets.get_dataset(args.dataset, args.batch_size, configs, train=True)

    loss_fn = losses_f.get_loss(args.dataset, configs[args.dataset]['tasks'])
    metric, aggregators, model_saver = metrics.get_metrics(args.dataset, configs[args.dataset]['tasks'])

    model = model_selector.get_model(args.dataset, configs[args.dataset]['tasks'], device=DEVICE)
    model_params = [p for v in model.values() for p in list(v.parameters())]

    optimizer = torch.optim.Adam(model_params, lr=args.lr, weight_decay=args.weight_decay)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, 0.95) if args.decay_lr else None
    mtl_opt = Baseline(optimizer)

    train_val_stats = []
    tasks = configs[args.dataset]['tasks']
    n_iter = 0  # expect: TB???
    for epoch in range(args.num_epochs):
        start = timer()

        for m in model:
            model[m].train()

        losses_per_epoch = {t: 0.0 for t in tasks}
        for cidx, batch in enumerate(train_loader):
            n_iter += 1
            images = batch[0].to(DEVICE)
            labels = {t: batch[i+1].to(DEVICE) for i, t in enumerate(tasks)}

            losses = []
            rep, _ = model['rep'](images, None)
            for t in tasks:
                out_t, _ = model[t](rep, None)
                losses.append(loss_fn[t](out_t, labels[t], average=False))

            for idx, t in enumerate(tasks):
                losses_per_epoch[t] += losses[idx].mean().detach()  # for logging purposes

            mtl_opt.iterate(losses, shared_repr=rep)

        if args.decay_lr:
            scheduler.step()

        # Print the stored (averaged across batches) training losses, per task.
        clog = "epochs {}/{}:".format(epoch, args.num_epochs)
        for t in tasks:
            clog += ' train_loss {} = {:5.4f}'.format(t, losses_per_epoch[t] / n_iter)
        logger.info(clog)
        epoch_stats = {}
        for i, t in enumerate(tasks):
            epoch_stats[f"train_loss_{t}"] = losses_per_epoch[t] / n_iter

        # Evaluate the model on the validation set.
        for m in model:
            model[m].eval()

        with torch.no_grad():
            losses_per_epoch = {t: 0.0 for t in tasks}
            num_val_batches = 0
            for batch_val in val_loader:
                val_images = batch_val[0].to(DEVICE)
                labels_val = {t: batch_val[i+1].to(DEVICE) for i, t in enumerate(tasks)}

                val_rep, _ = model['rep'](val_images, None)
                for t in tasks:
                    out_t_val, _ = model[t](val_rep, None)
                    loss_t = loss_fn[t](out_t_val, labels_val[t])
                    losses_per_epoch[t] += loss_t.item()  # for logging purposes
                    metric[t].update(out_t_val, labels_val[t])
                num_val_batches += 1

        for t in tasks:
            metric_results = metric[t].get_result()
            metric[t].reset()
            epoch_stats[f"val_loss_{t}"] = losses_per_epoch[t] / num_val_batches
            for metric_key in metric_results:
                epoch_stats[f"val_metric_{metric_key}_{t}"] = metric_results[metric_key]

        if not args.debug:
            wandb.log(epoch_stats, step=epoch)
        train_val_stats.append(epoch_stats)
        print('Epoch ended in {}s'.format(timer() - start))
    return train_val_stats
