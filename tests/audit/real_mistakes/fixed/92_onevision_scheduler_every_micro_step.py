# Fixed version of ../92_onevision_scheduler_every_micro_step.py: silent on the codes that file expects.
import torch  # noqa: F401


def train(backbone_ddp, opt, lr_scheduler, loader, backward_passes_per_step):
    for global_step, (images, labels) in enumerate(loader):
        loss = backbone_ddp(images, labels)
        scaled_loss = loss / backward_passes_per_step
        is_accumulation_step = (global_step + 1) % backward_passes_per_step != 0
        if is_accumulation_step:
            with backbone_ddp.no_sync():
                scaled_loss.backward()
        else:
            scaled_loss.backward()
            torch.nn.utils.clip_grad_norm_(backbone_ddp.parameters(), max_norm=5)
            opt.step()
            opt.zero_grad()
            lr_scheduler.step()  # not: TB102
