# Fixed version of ../105_cornn_test_leaves_eval_mode.py: silent on the codes that file expects.
import torch
import torch.nn as nn


def test(model, test_x, test_y, objective):
    model.eval()
    with torch.no_grad():
        out = model(test_x)
        loss = objective(out, test_y)
    model.train()
    return loss.item()


def train(model, get_batch, test_x, test_y, epochs, lr):
    objective = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for i in range(epochs):
        data, label = get_batch()
        optimizer.zero_grad()
        out = model(data)  # not: TB202
        loss = objective(out, label)
        loss.backward()
        optimizer.step()
        if i % 100 == 0:
            test(model, test_x, test_y, objective)
