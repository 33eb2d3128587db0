# TB203 eval-with-grad: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)
import torch


def validate_with_grad(model, val_loader):
    model.eval()
    total = 0.0
    for x, y in val_loader:
        total += loss_fn(model(x), y).item()  # expect: TB203
    return total


@torch.inference_mode()
def validate_decorated(model, val_loader):
    model.eval()
    return sum(loss_fn(model(x), y).item() for x, y in val_loader)


def validate_in_a_block(model, val_loader):
    model.eval()
    with torch.no_grad():
        return sum(loss_fn(model(x), y).item() for x, y in val_loader)


def fit(model, loader, val_loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    validate_with_grad(model, val_loader)
    validate_decorated(model, val_loader)
    validate_in_a_block(model, val_loader)


class NeuralNet:
    def infer(self, x):
        return self.module_(x)

    def train_step(self, x, y):
        self.module_.train()
        self.optimizer_.zero_grad()
        loss = self.criterion_(self.infer(x), y)
        loss.backward()
        self.optimizer_.step()

    def validation_step(self, x, y):
        self.module_.eval()
        with torch.no_grad():
            return self.criterion_(self.infer(x), y)


# A model frozen with requires_grad_(False) (here inside a method chain) builds no graph unless its inputs need
# gradients: uncertain.  The same sampler not frozen builds a graph per batch.
def sample_frozen(generator, labels, device):
    sampler = Sampler(generator)
    sampler.eval().requires_grad_(False).to(device)
    out = []
    for c in labels:
        out.append(sampler(c))  # expect-low: TB203
    return out


def sample_not_frozen(generator, labels, device):
    warm_sampler = Sampler(generator)
    warm_sampler.eval().to(device)
    out = []
    for c in labels:
        out.append(warm_sampler(c))  # expect: TB203
    return out
