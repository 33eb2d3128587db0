# TB114 accumulated-mean-of-means: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)
import torch
import torch.nn.functional as F
from torch import nn


# --------------------------------------------------------------------------- mistakes
def token_mean_divided_by_steps(model, loader, optimizer, accum_steps):
    for i, (x, labels) in enumerate(loader):
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=-100)
        loss = loss / accum_steps
        loss.backward()  # expect: TB114
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()


def criterion_with_ignore_index(model, loader, optimizer, args, pad_id):
    criterion = nn.CrossEntropyLoss(ignore_index=pad_id)
    for step, batch in enumerate(loader):
        logits = model(batch["input_ids"])
        loss = criterion(logits.flatten(0, 1), batch["labels"].flatten()) / args.gradient_accumulation_steps
        loss.backward()  # expect: TB114
        if (step + 1) % args.gradient_accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()


def masked_mean_divided_by_steps(model, loader, optimizer, scaler, accum):
    for i, batch in enumerate(loader):
        per_token = F.cross_entropy(model(batch["x"]).transpose(1, 2), batch["y"], reduction="none")
        mask = batch["attention_mask"]
        loss = (per_token * mask).sum() / mask.sum()
        scaler.scale(loss / accum).backward()  # expect: TB114
        if (i + 1) % accum == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()


def lm_loss(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=-100)


def loss_from_a_helper(model, loader, optimizer, accum):
    for i, (x, y) in enumerate(loader):
        loss = lm_loss(model(x), y)
        loss /= accum
        loss.backward()  # expect: TB114
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()


def split_batch_token_mean(model, x, y, optimizer, n_micro):
    for cx, cy in zip(x.chunk(n_micro), y.chunk(n_micro)):
        loss = F.nll_loss(model(cx).flatten(0, 1), cy.flatten(), ignore_index=0) / n_micro
        loss.backward()  # expect: TB114
    optimizer.step()
    optimizer.zero_grad()


def accelerate_divides_a_token_mean(accelerator, model, loader, optimizer):
    for x, y in loader:
        with accelerator.accumulate(model):
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=-100)
            accelerator.backward(loss)  # expect: TB114
            optimizer.step()
            optimizer.zero_grad()


class Trainer:
    def __init__(self, model, pad):
        self.model = model
        self.loss_fn = nn.CrossEntropyLoss(ignore_index=pad)

    def fit(self, loader, optimizer):
        for i, (x, y) in enumerate(loader):
            loss = self.loss_fn(self.model(x).flatten(0, 1), y.flatten())
            (loss / self.grad_accum).backward()  # expect: TB114
            if (i + 1) % self.grad_accum == 0:
                optimizer.step()
                optimizer.zero_grad()


def chunked_lm_loss(logits, targets, ignore_index=-100):
    # drops items only where the targets hold ignore_index: padded fine-tuning labels do, packed text does not
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=ignore_index)


def packed_tokens_with_a_default_ignore_index(model, loader, optimizer, accum):
    for i, tokens in enumerate(loader):
        loss = chunked_lm_loss(model(tokens[:, :-1]), tokens[:, 1:])
        (loss / accum).backward()  # expect-low: TB114
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()


def padded_labels_with_a_default_ignore_index(model, loader, optimizer, accum):
    for i, batch in enumerate(loader):
        loss = chunked_lm_loss(model(batch["input_ids"]), batch["labels"])
        (loss / accum).backward()  # expect: TB114
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()


# --------------------------------------------------------------------------- near misses (silent)
def summed_and_divided_by_the_update_count(model, batches, optimizer):
    num_items_in_batch = sum((b["labels"] != -100).sum() for b in batches)
    for b in batches:
        logits = model(b["input_ids"])
        loss = F.cross_entropy(logits.flatten(0, 1), b["labels"].flatten(), ignore_index=-100, reduction="sum")
        loss = loss / num_items_in_batch
        loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def masked_sum_over_the_update_count(model, loader, optimizer, accum, total_tokens):
    for i, batch in enumerate(loader):
        per_token = F.cross_entropy(model(batch["x"]).transpose(1, 2), batch["y"], reduction="none")
        loss = (per_token * batch["mask"]).sum() / total_tokens
        loss.backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()


def weighted_by_its_count(model, loader, optimizer, accum, total_tokens):
    for i, (x, y) in enumerate(loader):
        n_tokens = (y != -100).sum()
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=-100)
        loss = loss * n_tokens / total_tokens
        loss.backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()


def classification_with_equal_batches(model, loader, optimizer, accum):
    criterion = nn.CrossEntropyLoss()
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y) / accum
        loss.backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()


def token_mean_without_accumulation(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=-100)
        loss.backward()
        optimizer.step()


def token_mean_not_divided(model, loader, optimizer, accum):
    # TB105's finding (the loss is not divided at all), not this rule's
    for i, (x, y) in enumerate(loader):
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=-100)
        loss.backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()


def token_mean_in_evaluation(model, loader, accum):
    total = 0.0
    with torch.no_grad():
        for i, (x, y) in enumerate(loader):
            total += F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=-100).item() / accum
    return total


def accelerate_summed_over_the_update_count(accelerator, model, loader, optimizer, num_items):
    for x, y in loader:
        with accelerator.accumulate(model):
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=-100, reduction="sum")
            accelerator.backward(loss / num_items)
            optimizer.step()
            optimizer.zero_grad()
