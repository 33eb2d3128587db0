import torch.nn.functional as F


def distillation_loss(student_logits, teacher_logits, T=2.0):
    p_s = F.softmax(student_logits / T, dim=1)
    p_t = F.softmax(teacher_logits / T, dim=1)
    return F.kl_div(p_s, p_t, reduction="batchmean") * T * T  # expect: TB303
