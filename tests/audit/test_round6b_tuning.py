"""Planted cases for the round-6b false-alarm kinds (benchmarks/lint_corpus/heldout_round6b.md): each shape that
was a false alarm stays silent by default, and the neighbouring true shape is still reported."""

from __future__ import annotations

from tests.audit.helpers import found

_LOOP = """
for x, y in loader:
    {sched}
    optimizer.zero_grad()
    loss_fn(model(x), y).backward()
    optimizer.step()
"""


def test_tb101_hand_written_schedule_class_is_stepped_first_on_purpose():
    cls = '''
class WarmupCosineSchedule(object):
    def __init__(self, optimizer, warmup):
        self.optimizer, self.warmup, self._step = optimizer, warmup, 0

    def step(self):
        self._step += 1
        lr = min(1.0, self._step / self.warmup)
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        return lr

def init_opt(model):
    optimizer = torch.optim.AdamW(model.parameters())
    scheduler = WarmupCosineSchedule(optimizer, 10)
    return optimizer, scheduler

optimizer, scheduler = init_opt(model)
'''
    assert found(cls + _LOOP.format(sched="scheduler.step()"), "TB101") == []
    torch_sched = "scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)\n"
    assert found(torch_sched + _LOOP.format(sched="scheduler.step()"), "TB101") == [4]
    # torch's step() returns None: a value used is a hand-written schedule's
    assert found(_LOOP.format(sched="lr = scheduler.step()"), "TB101") == []


def test_tb303_own_entropy_method_named_cross_entropy():
    src = '''
class Gate(nn.Module):
    def cross_entropy(self, x):
        return -(x * torch.log(x + 1e-10)).sum(-1).mean()

    def forward(self, x):
        probs = self.softmax(self.gate(x))
        return self.cross_entropy(probs)
'''
    assert found(src, "TB303") == []
    plain = "probs = F.softmax(model(x), dim=-1)\nloss = F.cross_entropy(probs, y)\n"
    assert found(plain, "TB303") == [2]


def test_tb203_volatile_variable_is_the_old_no_grad():
    src = '''
def test(val_loader, model, criterion):
    model.eval()
    for inputs, targets in val_loader:
        inputs = torch.autograd.Variable(inputs, volatile=True)
        outputs = model(inputs)
        loss = criterion(outputs, targets)
'''
    assert found(src, "TB203") == []
    assert found(src.replace(", volatile=True", ""), "TB203") == [6]


def test_tb114_packed_stream_with_negative_ignore_index_is_low():
    src = '''
def train(model, optimizer, loader, accum):
    for i, data in enumerate(loader):
        input_ids = data[:, 0:block_size].contiguous()
        targets = data[:, 1:block_size + 1].contiguous()
        logits = model(input_ids)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        (loss / accum).backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
'''
    assert found(src, "TB114") == []
    assert found(src, "TB114", show_all=True) == [8]
    labels = src.replace("targets = data[:, 1:block_size + 1].contiguous()", "targets = labels_of(data)")
    assert found(labels, "TB114") == [8]


def test_tb403_the_programs_own_files_are_low():
    own_dataset = '''
class MNISTM(Dataset):
    processed_folder = "processed"
    training_file = "mnist_m_train.pt"

    def __init__(self, root):
        self.root = root
        self.data = torch.load(os.path.join(self.root, self.processed_folder, self.training_file))

    def download(self):
        with open(os.path.join(self.root, self.processed_folder, self.training_file), "wb") as f:
            torch.save(self.make(), f)
'''
    assert found(own_dataset, "TB403", torch="old") == []
    best_reload = '''
def train(model, optimizer, loader, args, setting):
    path = os.path.join(args.checkpoints, setting)
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    model.load_state_dict(torch.load(path + "/" + "checkpoint.pth"))
'''
    assert found(best_reload, "TB403", torch="old") == []
    user_path = '''
def main(args):
    state = torch.load(args.checkpoint)
    model.load_state_dict(state)
    torch.save(model.state_dict(), os.path.join(args.output_dir, "last.pt"))
'''
    # a command-line path stays reported where the program saves elsewhere
    assert found(user_path, "TB403", torch="old") == [3]


_HELPER_NO_SYNC = '''
from contextlib import nullcontext


class Trainer:
    def _sync_context(self, batch_idx):
        if self.ddp and batch_idx % self.accum_grad != 0:
            return self.model.no_sync()
        return nullcontext()

    def _should_step(self, batch_idx):
        return (batch_idx + 1) % self.accum_grad == 0

    def train_epoch(self, loader):
        for batch_idx, batch in enumerate(loader):
            with self._sync_context(batch_idx):
                loss = self.model(**batch)["loss"] / self.accum_grad
                loss.backward()
            if self._should_step(batch_idx):
                self.optimizer.step()
                self.optimizer.zero_grad()
'''


def test_tb111_no_sync_off_by_one_through_helper_methods():
    assert found(_HELPER_NO_SYNC, "TB111") == [16]
    fixed = _HELPER_NO_SYNC.replace("batch_idx % self.accum_grad != 0", "(batch_idx + 1) % self.accum_grad != 0")
    assert found(fixed, "TB111") == []
    inline_step = _HELPER_NO_SYNC.replace("if self._should_step(batch_idx):",
                                          "if (batch_idx + 1) % self.accum_grad == 0:")
    assert found(inline_step, "TB111") == [16]


_CLASS_WARMUP = '''
class WarmupScheduler:
    def __init__(self, optimizer, base_lr, warmup_steps):
        self.optimizer = optimizer
        self.base_lr = base_lr
        self.warmup_steps = warmup_steps
        self.step_num = 0

    def step(self):
        if self.step_num < self.warmup_steps:
            lr = self.base_lr * self.step_num / self.warmup_steps
        else:
            lr = self.base_lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.step_num += 1
'''


def test_tb304_schedule_class_with_its_own_counter_at_zero():
    assert found(_CLASS_WARMUP, "TB304") == [15]
    counted_first = _CLASS_WARMUP.replace("        self.step_num += 1\n", "").replace(
        "    def step(self):\n", "    def step(self):\n        self.step_num += 1\n")
    assert found(counted_first, "TB304") == []
    plus_one = _CLASS_WARMUP.replace("self.step_num / self.warmup_steps", "(self.step_num + 1) / self.warmup_steps")
    assert found(plus_one, "TB304") == []
