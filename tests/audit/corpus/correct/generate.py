import torch


@torch.no_grad()
def generate(model, idx, max_new_tokens, block_size=64):
    for _ in range(max_new_tokens):
        logits = model(idx[:, -block_size:])
        probs = torch.softmax(logits[:, -1, :], dim=-1)
        idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
    return idx


def sample(model, start):
    model.eval()
    return generate(model, start, 100)
