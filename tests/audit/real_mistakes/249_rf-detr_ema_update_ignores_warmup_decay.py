# Reconstructed after roboflow/rf-detr PR #59 ("ensure tau gets used when computing decay", merged, https://github.com/roboflow/rf-detr/pull/59): ModelEma in rfdetr/util/utils.py computes a warm-up decay in _get_decay() (decay * (1 - exp(-updates / tau)), so the EMA tracks the live weights closely during the first steps), but update() - called by train_one_epoch() in rfdetr/engine.py after every optimizer step - blended with the constant self.decay and never called _get_decay(), so ema_tau was silently ignored and the EMA model stayed anchored to the (random/pretrained) initial weights early in training. The fix computes decay = self._get_decay() in update() and uses it in the blend.
import math
import sys
from copy import deepcopy

import torch

import util.misc as utils


class ModelEma(torch.nn.Module):
    """EMA Model"""
    def __init__(self, model, decay=0.9997, tau=0, device=None):
        super(ModelEma, self).__init__()
        # make a copy of the model for accumulating moving average of weights
        self.module = deepcopy(model)
        self.module.eval()

        self.decay = decay
        self.tau = tau
        self.updates = 1
        self.device = device  # perform ema on different device from model if set
        if self.device is not None:
            self.module.to(device=device)

    def _get_decay(self):
        if self.tau == 0:
            return self.decay
        else:
            return self.decay * (1 - math.exp(-self.updates / self.tau))

    def _update(self, model, update_fn):
        with torch.no_grad():
            for ema_v, model_v in zip(self.module.state_dict().values(), model.state_dict().values()):
                if self.device is not None:
                    model_v = model_v.to(device=self.device)
                ema_v.copy_(update_fn(ema_v, model_v))

    def update(self, model):
        self._update(model, update_fn=lambda e, m: self.decay * e + (1. - self.decay) * m)  # expect: TB???
        self.updates += 1

    def set(self, model):
        self._update(model, update_fn=lambda e, m: m)


def train_one_epoch(model, criterion, lr_scheduler, data_loader, optimizer, device, epoch,
                    batch_size, max_norm=0, ema_m=None, args=None):
    metric_logger = utils.MetricLogger(delimiter="  ")
    header = "Epoch: [{}]".format(epoch)
    print_freq = 10

    optimizer.zero_grad()
    assert batch_size % args.grad_accum_steps == 0
    sub_batch_size = batch_size // args.grad_accum_steps
    for data_iter_step, (samples, targets) in enumerate(metric_logger.log_every(data_loader, print_freq, header)):
        for i in range(args.grad_accum_steps):
            start_idx = i * sub_batch_size
            final_idx = start_idx + sub_batch_size
            new_samples = samples[start_idx:final_idx].to(device)
            new_targets = [{k: v.to(device) for k, v in t.items()} for t in targets[start_idx:final_idx]]

            outputs = model(new_samples, new_targets)
            loss_dict = criterion(outputs, new_targets)
            weight_dict = criterion.weight_dict
            losses = sum(
                (1 / args.grad_accum_steps) * loss_dict[k] * weight_dict[k]
                for k in loss_dict.keys()
                if k in weight_dict
            )
            losses.backward()

        # reduce losses over all GPUs for logging purposes
        loss_dict_reduced = utils.reduce_dict(loss_dict)
        loss_dict_reduced_scaled = {k: v * weight_dict[k] for k, v in loss_dict_reduced.items() if k in weight_dict}
        loss_value = sum(loss_dict_reduced_scaled.values()).item()

        if not math.isfinite(loss_value):
            print("Loss is {}, stopping training".format(loss_value))
            sys.exit(1)

        if max_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)

        optimizer.step()
        lr_scheduler.step()
        optimizer.zero_grad()
        if ema_m is not None:
            if epoch >= 0:
                ema_m.update(model)
        metric_logger.update(loss=loss_value, **loss_dict_reduced_scaled)
        metric_logger.update(lr=optimizer.param_groups[0]["lr"])
    metric_logger.synchronize_between_processes()
    print("Averaged stats:", metric_logger)
    return {k: meter.global_avg for k, meter in metric_logger.meters.items()}
