import torch.nn.functional as F

def loss_fn(logits, target_dist):
    probs = F.softmax(logits, dim=-1)
    return F.kl_div(probs, target_dist, reduction="batchmean")  # expect: TB303
