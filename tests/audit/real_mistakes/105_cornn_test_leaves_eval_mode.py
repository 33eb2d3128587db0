# Reconstructed after tk-rusch/coRNN issue #1 ("model.train() isn't called again after model.eval()"; the maintainer
# answered that the model has no dropout or BatchNorm and changed the code anyway): the adding-task script evaluated
# with model.eval() inside its training loop and never switched back to train mode.
import torch
import torch.nn as nn


def test(model, test_x, test_y, objective):
    model.eval()
    with torch.no_grad():
        out = model(test_x)
        loss = objective(out, test_y)
    return loss.item()


def train(model, get_batch, test_x, test_y, epochs, lr):
    objective = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for i in range(epochs):
        data, label = get_batch()
        optimizer.zero_grad()
        out = model(data)  # also-ok: TB202
        loss = objective(out, label)
        loss.backward()
        optimizer.step()
        if i % 100 == 0:
            test(model, test_x, test_y, objective)  # expect: TB202
