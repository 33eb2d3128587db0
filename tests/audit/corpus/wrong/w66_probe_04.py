class KerasLike:
    def __init__(self, net, optimizer, criterion):
        self.net, self.optimizer, self.criterion = net, optimizer, criterion
        self.history = {"loss": []}

    def fit(self, loader, epochs=1):
        for _ in range(epochs):
            for xb, yb in loader:
                self.optimizer.zero_grad()
                loss = self.criterion(self.net(xb), yb)
                loss.backward()
                self.optimizer.step()
                self.history["loss"].append(loss)  # expect: TB204
