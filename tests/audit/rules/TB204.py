# TB204 loss-kept-with-graph: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)


def running_total_keeps_graphs(model, loader, optimizer):
    total_loss = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss  # expect: TB204
    return total_loss


def running_total_of_numbers(model, loader, optimizer):
    total_loss = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
    return total_loss


def detached_list(model, loader, optimizer):
    losses = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return losses


def loss_summed_before_backward(model, x_chunks, y_chunks, optimizer):
    optimizer.zero_grad()
    total = 0.0
    for x, y in zip(x_chunks, y_chunks):
        total += loss_fn(model(x), y)  # the sum is what backward() runs on
    total.backward()
    optimizer.step()


class Trainer:
    def _weighted(self, loss, out, y):
        n = self.task.loss_count(out, y)  # how many targets the loss averaged: a count, not a loss
        self.counted = self.counted + n
        return loss * n

    def fit(self, loader):
        for x, y in loader:
            self.optimizer.zero_grad()
            out = self.model(x)
            self._weighted(self.loss_fn(out, y), out, y).backward()
            self.optimizer.step()
