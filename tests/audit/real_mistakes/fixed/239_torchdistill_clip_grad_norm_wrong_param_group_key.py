# Reconstructed after yoshitomo-matsubara/torchdistill PR #80 ("Fix bugs for clip grad norm", merged, https://github.com/yoshitomo-matsubara/torchdistill/pull/80): TrainingBox.update_params() (torchdistill/core/training.py, same in distillation.py) gathered the parameters to clip with group['group'] instead of group['params'] from optimizer.param_groups, so gradient-norm clipping without apex raised a KeyError and could never be applied. The fix reads group['params'].
# Fixed version (the merged PR applied).
import torch
import torch.distributed as dist
from torch import nn

try:
    from apex import amp
except ImportError:
    amp = None

from torchdistill.common.module_util import unfreeze_module_params
from torchdistill.core.util import extract_io_dict


class TrainingBox(nn.Module):
    def __init__(self, model, data_loader_dict, train_config, device, device_ids, distributed, lr_factor):
        super().__init__()
        self.org_model = model
        self.device = device
        self.device_ids = device_ids
        self.distributed = distributed
        self.lr_factor = lr_factor
        self.model = None
        self.model_forward_proc = None
        self.model_io_dict = dict()
        self.train_data_loader, self.val_data_loader, self.optimizer, self.lr_scheduler = None, None, None, None
        self.org_criterion, self.criterion, self.extract_org_loss = None, None, None
        self.grad_accum_step = None
        self.max_grad_norm = None
        self.scheduling_step = 0
        self.stage_grad_count = 0
        self.apex = None
        self.setup(train_config)
        self.num_epochs = train_config['num_epochs']

    def pre_process(self, epoch=None, **kwargs):
        self.model.train()
        if self.distributed:
            self.train_data_loader.batch_sampler.sampler.set_epoch(epoch)

    def forward(self, sample_batch, targets, supp_dict):
        model_outputs = self.model_forward_proc(self.model, sample_batch, targets, supp_dict)
        extracted_model_io_dict = extract_io_dict(self.model_io_dict, self.device)
        org_loss_dict = self.extract_org_loss(self.org_criterion, model_outputs, None, targets,
                                              uses_teacher_output=False, supp_dict=supp_dict)
        output_dict = {'student': extracted_model_io_dict, 'teacher': dict()}
        total_loss = self.criterion(output_dict, org_loss_dict, targets)
        return total_loss

    def update_params(self, loss):
        self.stage_grad_count += 1
        if self.grad_accum_step > 1:
            loss /= self.grad_accum_step

        if self.apex:
            with amp.scale_loss(loss, self.optimizer) as scaled_loss:
                scaled_loss.backward()
        else:
            loss.backward()

        if self.stage_grad_count % self.grad_accum_step == 0:
            if self.max_grad_norm is not None:
                target_params = amp.master_params(self.optimizer) if self.apex \
                    else [p for group in self.optimizer.param_groups for p in group['params']]  # not: TB???
                torch.nn.utils.clip_grad_norm_(target_params, self.max_grad_norm)

            self.optimizer.step()
            self.optimizer.zero_grad()

        if self.lr_scheduler is not None and self.scheduling_step > 0 \
                and self.stage_grad_count % self.scheduling_step == 0:
            self.lr_scheduler.step()

    def post_process(self, **kwargs):
        if self.lr_scheduler is not None and self.scheduling_step <= 0:
            self.lr_scheduler.step()
        if self.distributed:
            dist.barrier()

    def clean_modules(self):
        unfreeze_module_params(self.org_model)
        self.model_io_dict.clear()


def train_one_epoch(training_box, device, epoch):
    training_box.pre_process(epoch=epoch)
    for sample_batch, targets, supp_dict in training_box.train_data_loader:
        sample_batch, targets = sample_batch.to(device), targets.to(device)
        loss = training_box(sample_batch, targets, supp_dict)
        training_box.update_params(loss)
    training_box.post_process()
