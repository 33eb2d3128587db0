"""Planted cases for the round-9 false-alarm kinds and misses (benchmarks/lint_corpus/heldout_round9.md), tuned on
after round 9 was measured: each shape stays silent (or low) by default, its true neighbour is still reported."""

from __future__ import annotations

from tests.audit.helpers import found

_TRAIN = '''
def train(model, optimizer, loader, val_loader):
    for epoch in range(10):
        model.train()
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
        {evaluate}
'''


def test_tb201_a_callable_evaluator_object_is_not_a_model():
    src = '''
import torch
import torch.nn as nn

class MscEval(object):
    def __call__(self, net, dl):
        return sum(net(x).argmax(1).eq(y).sum().item() for x, y in dl)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

def evaluate(net, dl):
    net.eval()
    with torch.no_grad():
        single_scale = MscEval()
        return single_scale(net, dl)
''' + _TRAIN.format(evaluate="evaluate(model, val_loader)")
    assert found(src, "TB201") == []


def test_tb201_eval_of_the_parent_module_covers_its_submodules():
    src = '''
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))

def validate(model, classifier, loader):
    {switch}
    classifier.eval()
    with torch.no_grad():
        for x, y in loader:
            out = classifier(model.encoder(x))

def train(model, classifier, optimizer, loader, val_loader):
    for epoch in range(10):
        model.train()
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(classifier(model.encoder(x)), y).backward()
            optimizer.step()
        validate(model, classifier, val_loader)
'''
    assert found(src.format(switch="model.eval()"), "TB201") == []
    assert found(src.format(switch="[model[k].eval() for k in model]"), "TB201") == []
    assert found(src.format(switch="pass"), "TB201") == [15]


def test_tb203_a_helper_loop_inside_a_training_iteration_is_not_an_evaluation():
    src = '''
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(4)

def train(model, optimizer, loader, epochs):
    for epoch in range(epochs):
        _ = [model[k].eval() for k in model]
        model.decoder.train()
        for x, mels in loader:
            styles = []
            for mel in mels:
                styles.append(model.style_encoder(mel))
            loss = model.decoder(x, torch.stack(styles).detach()).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
'''
    # the style encoder is kept in eval mode through training (put there before the batch loop): not an evaluation
    assert found(src, "TB203") == []


def test_tb401_a_documented_variable_of_the_file_and_a_platform_check_are_low():
    own = '''
import os

def locate_cuda():
    """Starts by looking for the CUDAHOME env variable."""
    if "CUDAHOME" in os.environ:
        return os.environ["CUDAHOME"]
'''
    assert found(own, "TB401") == []
    assert found(own, "TB401", show_all=True) == [6, 7]
    assert found(own.replace('"""Starts by looking for the CUDAHOME env variable."""', "pass"), "TB401") == [6, 7]
    guarded = '''
import os

def copy_mode(src, dst):
    try:
        os.lchmod(dst, os.lstat(src).st_mode)
    except Exception:
        pass
'''
    if not hasattr(__import__("os"), "lchmod"):  # on macOS/BSD os.lchmod exists and nothing is reported
        assert found(guarded, "TB401") == []
        assert found(guarded, "TB401", show_all=True) == [6]


def test_tb301_a_table_with_a_params_entry_of_labels_is_not_a_param_group():
    src = '''
METRICS = {
    "params": ["complexity.params", "params (M)", lambda v: v / 1e6],
    "lr": ["cfg.OPTIM.BASE_LR", "lr", None],
    "wd": ["cfg.OPTIM.WEIGHT_DECAY", "wd", None],
}
'''
    assert found(src, "TB301") == []
    group = 'groups = [{"params": model.parameters(), "lr": 0.1, "wd": 1e-4}]\n'
    assert found(group, "TB301") == [1]


def test_tb403_own_paths_passed_to_a_save_walked_from_an_own_folder_and_an_optimizer_state():
    passed = '''
def train(model, optimizer, opt, model_save_dir):
    torch.save({"state_dict": model.state_dict()}, model_save_dir)

def evaluate(model, opt, model_save_dir):
    model.load_state_dict(torch.load(model_save_dir)["state_dict"])

def main(opt, model, optimizer):
    model_save_dir = "models/LongRange/{}/best.pth".format(opt.data)
    if opt.eval:
        evaluate(model, opt, model_save_dir)
    else:
        train(model, optimizer, opt, model_save_dir)
'''
    assert found(passed, "TB403", torch="old") == []
    alone = passed.replace('    torch.save({"state_dict": model.state_dict()}, model_save_dir)', "    pass")
    assert found(alone, "TB403", torch="old") == [6]  # main() builds it from opt.data: a command-line argument
    walked = '''
for root, dirs, files in os.walk("{folder}"):
    for name in files:
        model_path = os.path.join(root, name)
        weights = torch.load(model_path, map_location="cpu")
'''
    assert found(walked.format(folder="checkpoints"), "TB403", torch="old") == []
    assert found(walked.replace('"{folder}"', "sys.argv[1]"), "TB403", torch="old") == [5]
    optim = '''
def load_optimizer_checkpoint(model, optimizer_checkpoint_path, rank):
    full_osd = torch.load(optimizer_checkpoint_path)
    sharded_osd = FSDP.scatter_full_optim_state_dict(full_osd, model)
    return sharded_osd
'''
    assert found(optim, "TB403", torch="old") == []
    other = optim.replace("scatter_full_optim_state_dict", "load_model_weights")
    assert found(other, "TB403", torch="old") == [] and found(other, "TB403", torch="old", show_all=True) == [3]


def test_tb103_the_models_zero_grad_inside_accelerator_accumulate():
    src = '''
def step(accelerator, policy, optimizer, rollouts, compute_loss):
    for batch in rollouts:
        with accelerator.accumulate(policy):
            loss = compute_loss(policy, batch)
            accelerator.backward(loss)
            optimizer.step()
            {zero}
'''
    assert found(src.format(zero="policy.zero_grad(set_to_none=True)"), "TB103") == [8]
    assert found(src.format(zero="optimizer.zero_grad(set_to_none=True)"), "TB103") == []
    assert found(src.format(zero="if accelerator.sync_gradients:\n                policy.zero_grad()"), "TB103") == []
