# Reconstructed after vinhkhuc/PyTorch-Mini-Tutorials issue #1 ("About CrossEntroyLoss": can the softmax layer be
# removed from the model?; the maintainer: "CrossEntropyLoss ... computes softmax internally. So, the softmax layer is
# unnecessary. Thanks for pointing that out"): the logistic-regression tutorial built a Sequential ending in a
# Softmax module and trained it with CrossEntropyLoss.
import torch


def build_model(input_dim, output_dim):
    model = torch.nn.Sequential()
    model.add_module("linear", torch.nn.Linear(input_dim, output_dim, bias=False))
    model.add_module("softmax", torch.nn.Softmax(dim=1))
    return model


def train(model, loss, optimizer, x_val, y_val):
    optimizer.zero_grad()
    fx = model.forward(x_val)
    output = loss.forward(fx, y_val)  # expect: TB303
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
