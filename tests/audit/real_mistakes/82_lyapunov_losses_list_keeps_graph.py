# Reconstructed after StanfordASL/neural-network-lyapunov PR #140 ("Fix the memory leak when calling line search
# sd for training Lyapunov": "losses list only stores the float value, not the tensor", merged): the training loop
# appended every iteration's loss tensor, keeping each iteration's graph alive.
import torch  # noqa: F401


def train_lyapunov(relu, optimizer, samples, max_iterations, total_loss):
    losses = []
    for _ in range(max_iterations):
        optimizer.zero_grad()
        loss = total_loss(relu, samples)
        loss.backward()
        optimizer.step()
        losses.append(loss)  # expect: TB204
    return losses
