"""Knowledge distillation: teacher in eval under no_grad, KL on log_softmax (correct)."""
import torch
import torch.nn.functional as F


def distill(student, teacher, loader, optimizer, T=4.0, alpha=0.5, epochs=3):
    teacher.eval()
    for epoch in range(epochs):
        student.train()
        for x, y in loader:
            with torch.no_grad():
                t_logits = teacher(x)
            s_logits = student(x)
            kd = F.kl_div(F.log_softmax(s_logits / T, dim=1), F.softmax(t_logits / T, dim=1),
                          reduction="batchmean") * T * T
            loss = alpha * kd + (1 - alpha) * F.cross_entropy(s_logits, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def soft_ce(logits, soft_targets):
    return -(soft_targets * F.log_softmax(logits, dim=-1)).sum(dim=-1).mean()


def entropy_bonus(logits):
    p = F.softmax(logits, dim=-1)
    return -(p * F.log_softmax(logits, dim=-1)).sum(-1).mean()
