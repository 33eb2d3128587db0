"""Near misses of probe 4 (correct): average helpers once per update, a hand-written SGD step, running
sums of detached losses, entropy bonuses and guarded logs, batch splits that average the gradients."""
import torch
import torch.nn.functional as F
from torch.distributions import Categorical


@torch.no_grad()
def update_ema(ema_model, model, decay=0.999):
    for e, p in zip(ema_model.parameters(), model.parameters()):
        e.mul_(decay).add_(p, alpha=1 - decay)


@torch.no_grad()
def manual_sgd(model, lr=0.1, wd=1e-4):
    for p in model.parameters():
        p.mul_(1 - lr * wd).add_(p.grad, alpha=-lr)


def train(model, ema_model, loader, opt, accum=4):
    meters = {"loss": 0.0}
    for i, (x, y) in enumerate(loader):
        loss = F.cross_entropy(model(x), y) / accum
        loss.backward()
        meters["loss"] = meters["loss"] + loss.item()
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad()
            update_ema(ema_model, model)
    return meters


def train_plain_sgd(model, loader):
    for x, y in loader:
        model.zero_grad()
        F.mse_loss(model(x), y).backward()
        manual_sgd(model)


def actor_critic_loss(logits, actions, advantages, values, returns, ent_coef=0.01):
    probs = F.softmax(logits, dim=-1)
    entropy = -(probs * torch.log(probs)).sum(-1).mean()
    logp = Categorical(logits=logits).log_prob(actions)
    loss = -(logp * advantages).mean() + F.mse_loss(values, returns) - ent_coef * entropy
    return loss


def smoothed_ce(logits, soft_targets, eps=1e-8):
    probs = F.softmax(logits, dim=-1)
    return -(soft_targets * torch.log(probs + eps)).sum(-1).mean()


def split_step(model, opt, x, y, n_micro=4):
    opt.zero_grad(set_to_none=True)
    for cx, cy in zip(x.chunk(n_micro), y.chunk(n_micro)):
        loss = F.mse_loss(model(cx), cy, reduction="sum") / x.size(0)
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


def split_step_grad_mean(model, opt, batches, accum=4):
    opt.zero_grad()
    for _ in range(accum):
        x, y = next(batches)
        F.cross_entropy(model(x), y).backward()
    for p in model.parameters():
        if p.grad is not None:
            p.grad.div_(accum)
    opt.step()


def wgan_step(gen, disc, opt_g, opt_d, z, real, n_critic=5):
    for _ in range(n_critic):
        opt_d.zero_grad()
        (disc(gen(z).detach()).mean() - disc(real).mean()).backward()
        opt_d.step()
    opt_g.zero_grad()
    (-disc(gen(z)).mean()).backward()
    opt_g.step()
