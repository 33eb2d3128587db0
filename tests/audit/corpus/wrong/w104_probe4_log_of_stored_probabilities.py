"""Hand-written cross-entropies taking the log of softmax probabilities kept in a name."""
import torch
import torch.nn.functional as F


def distill_loss(student_logits, teacher_logits, T=4.0):
    p_t = F.softmax(teacher_logits / T, dim=-1)
    p_s = F.softmax(student_logits / T, dim=-1)
    kl = (p_t * (p_t.log() - p_s.log())).sum(-1).mean()  # expect: TB303
    return kl * T * T


class LabelSmoothing(torch.nn.Module):
    def __init__(self, eps=0.1):
        super().__init__()
        self.eps = eps

    def forward(self, logits, target):
        n = logits.size(-1)
        probs = logits.softmax(-1)
        log_probs = torch.log(probs)  # expect: TB303
        smooth = torch.full_like(probs, self.eps / (n - 1)).scatter_(-1, target[:, None], 1 - self.eps)
        loss = -(smooth * log_probs).sum(-1)
        return loss.mean()


def reinforce_step(policy, optimizer, states, actions, returns):
    probs = torch.softmax(policy(states), dim=-1)
    chosen = probs[torch.arange(len(actions)), actions]
    loss = -(torch.log(chosen) * returns).mean()  # expect: TB303
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
