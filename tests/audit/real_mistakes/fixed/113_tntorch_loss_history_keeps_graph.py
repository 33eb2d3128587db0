# Fixed version of ../113_tntorch_loss_history_keeps_graph.py: silent on the codes that file expects.
import torch


def optimize(tensors, loss_function, optimizer=torch.optim.Adam, tol=1e-4, max_iter=10000, print_freq=500):
    parameters = [t for t in tensors]
    optimizer = optimizer(parameters)
    loss_history = []
    for _i in range(max_iter):
        optimizer.zero_grad()
        loss = loss_function(*tensors)
        loss.backward()
        optimizer.step()
        loss_history.append(loss.item())  # not: TB204
        if len(loss_history) >= 2 and abs(loss_history[-1] - loss_history[-2]) < tol:
            break
    return loss_history
