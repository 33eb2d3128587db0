import torch
import torch.nn.functional as F


def train_multitask(model, loader, opt, accum_steps=4):
    model.train()
    seg_history = []
    for it, batch in enumerate(loader):
        seg_logits, depth = model(batch["image"])
        seg = F.binary_cross_entropy_with_logits(seg_logits, batch["mask"])
        dep = F.gaussian_nll_loss(depth, batch["depth"], torch.ones_like(depth))
        objective = torch.stack([seg, dep]).sum()
        objective.backward()  # expect: TB105
        seg_history.append(seg)  # expect: TB204
        if (it + 1) % accum_steps == 0:
            opt.step()
            opt.zero_grad(set_to_none=True)
    return seg_history
