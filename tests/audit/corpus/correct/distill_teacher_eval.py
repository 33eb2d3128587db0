"""Distillation where the teacher runs without no_grad but in eval mode and frozen (correct)."""
import torch
import torch.nn.functional as F


def train(student, teacher, loader, epochs=2, T=3.0):
    teacher.eval()
    teacher.requires_grad_(False)
    optimizer = torch.optim.SGD(student.parameters(), lr=0.01, momentum=0.9)
    for epoch in range(epochs):
        student.train()
        for x, y in loader:
            t_logits = teacher(x)
            s_logits = student(x)
            loss = F.kl_div(F.log_softmax(s_logits / T, 1), F.log_softmax(t_logits / T, 1),
                            log_target=True, reduction="batchmean")
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
