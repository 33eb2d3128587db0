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


# After the loss's own backward() the graph's saved tensors are freed; a running sum restarted at every
# optimizer step stays small.  Summed before the backward (or never backed), the activations are kept.
def running_sum_after_backward_reset_every_update(model, loader, optimizer, accum):
    running_loss = 0.0
    for i, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y) / accum
        loss.backward()
        running_loss += loss
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
            log(running_loss)
            running_loss = 0.0


def running_sum_before_backward(model, loader, optimizer, accum):
    pending = 0.0
    for i, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y) / accum
        pending += loss  # expect: TB204
        loss.backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
            log(pending)
            pending = 0.0


# A step's output dict appended after its loss was backpropagated keeps the graph; replacing the loss by its
# detached value first does not.
def outputs_with_attached_loss(module, optimizer, dataloader):
    outputs = []
    for i, batch in enumerate(dataloader):
        optimizer.zero_grad()
        output = module.training_step(batch, i)
        output["loss"].backward()
        optimizer.step()
        outputs.append(output)  # expect: TB204
    return outputs


def outputs_with_detached_loss(module, optimizer, dataloader):
    outputs = []
    for i, batch in enumerate(dataloader):
        optimizer.zero_grad()
        output = module.training_step(batch, i)
        output["loss"].backward()
        optimizer.step()
        output["loss"] = output["loss"].detach()
        outputs.append(output)
    return outputs
