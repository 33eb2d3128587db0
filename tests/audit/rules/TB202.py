# TB202 train-in-eval-mode: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)
import torch
from _tb202_helpers import evaluate_and_back, evaluate_eval_only


def never_back_to_train(model, loader, val_loader, optimizer, epochs):
    for _epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
        model.eval()  # expect: TB202
        with torch.no_grad():
            val = sum(loss_fn(model(x), y).item() for x, y in val_loader)


def back_to_train_every_epoch(model, loader, val_loader, optimizer, epochs):
    for _epoch in range(epochs):
        model.train()
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            val = sum(loss_fn(model(x), y).item() for x, y in val_loader)


def mode_restored(model, loader, optimizer):
    for x, y in loader:
        was_training = model.training
        model.eval()
        with torch.no_grad():
            probe = model(x)
        model.train(was_training)
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()


def frozen_backbone(model, loader, optimizer):
    model.backbone.requires_grad_(False)
    model.backbone.eval()  # a frozen part kept in eval mode on purpose, not trained
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model.head(model.backbone(x)), y).backward()
        optimizer.step()


def validate(model, val_loader):
    model.eval()
    with torch.no_grad():
        return sum(loss_fn(model(x), y).item() for x, y in val_loader)


def validation_mid_epoch(model, loader, val_loader, optimizer, every):
    model.train()
    for i, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
        if i % every == 0:
            validate(model, val_loader)  # expect: TB202


def set_mode(mode, models):
    for m in models:
        if mode == "train":
            m.train()
        if mode == "eval":
            m.eval()


def check_accuracy(encoder, decoder, loader):
    set_mode("eval", [encoder, decoder])
    with torch.no_grad():
        return sum((decoder(encoder(x)).argmax(1) == y).sum().item() for x, y in loader)


def check_accuracy_and_back(encoder, decoder, loader):
    set_mode("eval", [encoder, decoder])
    with torch.no_grad():
        acc = sum((decoder(encoder(x)).argmax(1) == y).sum().item() for x, y in loader)
    set_mode("train", [encoder, decoder])
    return acc


def train_with_checks(encoder, decoder, loader, val_loader, optimizer, every):
    set_mode("train", [encoder, decoder])
    for t, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss_fn(decoder(encoder(x)), y).backward()
        optimizer.step()
        if t % every == 0:
            check_accuracy(encoder, decoder, val_loader)  # expect: TB202


def train_with_checks_that_switch_back(encoder, decoder, loader, val_loader, optimizer, every):
    set_mode("train", [encoder, decoder])
    for t, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss_fn(decoder(encoder(x)), y).backward()
        optimizer.step()
        if t % every == 0:
            check_accuracy_and_back(encoder, decoder, val_loader)


def validation_in_another_module(model, loader, val_loader, optimizer, every):
    for _epoch in range(3):
        model.train()
        for i, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
            if i % every == 0:
                evaluate_eval_only(model, val_loader)  # expect: TB202


def validation_in_another_module_that_switches_back(model, loader, val_loader, optimizer, every):
    for _epoch in range(3):
        model.train()
        for i, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
            if i % every == 0:
                evaluate_and_back(model, val_loader)


# Linear probing: the backbone is frozen and kept in eval() on purpose (its BatchNorm statistics must not move).
# The wrong twin trains every parameter and forgets train().
def probe_all_trained(net, loader, val_loader, optimizer, epochs):
    for _epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(net(x), y).backward()
            optimizer.step()
        net.eval()  # expect: TB202
        evaluate(net, val_loader)


def linear_probe(probed, loader, optimizer, epochs):
    for name, param in probed.named_parameters():
        if name not in ("fc.weight", "fc.bias"):
            param.requires_grad = False
    for _epoch in range(epochs):
        probed.eval()  # expect-low: TB202
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(probed(x), y).backward()
            optimizer.step()


# A comment that states the intent demotes the finding to --all (it never drops it).
def eval_on_purpose(student, loader, optimizer, epochs):
    for _epoch in range(epochs):
        # keep BatchNorm statistics fixed on purpose while fine-tuning
        student.eval()  # expect-low: TB202
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(student(x), y).backward()
            optimizer.step()


def eval_with_an_unrelated_comment(learner, loader, optimizer, epochs):
    for _epoch in range(epochs):
        # switch to evaluation mode
        learner.eval()  # expect: TB202
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(learner(x), y).backward()
            optimizer.step()


# A model made only of Linear layers and activations: train and eval mode compute the same thing.
class TinyMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class TinyDropoutMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.drop = torch.nn.Dropout(0.1)

    def forward(self, x):
        return self.drop(self.fc1(x))


def mode_free_model(loader, optimizer, epochs):
    mlp = TinyMLP()
    for _epoch in range(epochs):
        mlp.eval()
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(mlp(x), y).backward()
            optimizer.step()


def dropout_model(loader, optimizer, epochs):
    dmlp = TinyDropoutMLP()
    for _epoch in range(epochs):
        dmlp.eval()  # expect: TB202
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(dmlp(x), y).backward()
            optimizer.step()
