import torch


def fit(model, data, epochs, lr=0.01):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    criterion = torch.nn.MSELoss()
    for epoch in range(epochs):
        for inputs, target in data:
            output = model(inputs)
            loss = criterion(output, target)
            loss.backward()
            optimizer.zero_grad()  # expect: TB103
            optimizer.step()
