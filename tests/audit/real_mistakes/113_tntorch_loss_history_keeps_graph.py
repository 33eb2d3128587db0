# Reconstructed after rballester/tntorch PR #19 ("Removed annoying memory leak": "Every added loss used to be a full
# computational graph", merged): the optimize() loop appended each iteration's loss tensor to loss_history.
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
        loss_history.append(loss)  # expect: TB204
        if len(loss_history) >= 2 and abs(loss_history[-1].item() - loss_history[-2].item()) < tol:
            break
    return loss_history
