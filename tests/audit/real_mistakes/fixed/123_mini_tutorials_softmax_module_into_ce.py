# Fixed version of ../123_mini_tutorials_softmax_module_into_ce.py: silent on the codes that file expects.
import torch


def build_model(input_dim, output_dim):
    model = torch.nn.Sequential()
    model.add_module("linear", torch.nn.Linear(input_dim, output_dim, bias=False))
    return model


def train(model, loss, optimizer, x_val, y_val):
    optimizer.zero_grad()
    fx = model.forward(x_val)
    output = loss.forward(fx, y_val)  # not: TB303
    output.backward()
    optimizer.step()
    return output.item()


def main(trX, trY, n_classes, epochs, batch_size):
    model = build_model(trX.shape[1], n_classes)
    loss = torch.nn.CrossEntropyLoss(reduction="mean")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for _ in range(epochs):
        for k in range(0, len(trX), batch_size):
            train(model, loss, optimizer, trX[k:k + batch_size], trY[k:k + batch_size])
