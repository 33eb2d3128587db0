# Fixed version of ../82_lyapunov_losses_list_keeps_graph.py: silent on the codes that file expects.
import torch  # noqa: F401


def train_lyapunov(relu, optimizer, samples, max_iterations, total_loss):
    losses = []
    for _ in range(max_iterations):
        optimizer.zero_grad()
        loss = total_loss(relu, samples)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())  # not: TB204
    return losses
