"""Tuning on round 24's false alarms (heldout_round24.md): each test fails on the rules that batch was measured with
(df12bbf) and checks that the true shapes next to it are still reported."""

from __future__ import annotations

from tests.audit.helpers import found

# --------------------------------------------------------------------------- TB201: PyTorch Geometric layers
PYG = """
    import torch
    from torch import nn
    from torch_geometric.nn import {imports}

    class Model(torch.nn.Module):
        def __init__(self, c_in, hidden, c_out):
            super().__init__()
            self.conv = {conv}
            self.head = nn.Sequential(nn.ReLU(), nn.Linear(hidden, c_out))

        def forward(self, x, edge_index):
            return self.head(self.conv(x, edge_index))

    model = Model(16, 32, 4)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def train(data):
        model.train()
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(data.x, data.edge_index), data.y)
        loss.backward()
        optimizer.step()

    @torch.no_grad()
    def test(data):
        out = model(data.x, data.edge_index)
        return (out.argmax(-1) == data.y).float().mean()
"""


def test_pyg_layers_without_dropout_leave_the_mode_irrelevant():
    for imports, conv in [("GCNConv", "GCNConv(c_in, hidden)"), ("SAGEConv", "SAGEConv(c_in, hidden)"),
                          ("GATConv", "GATConv(c_in, hidden, heads=1)"),
                          ("GINConv", "GINConv(nn.Sequential(nn.Linear(c_in, hidden), nn.ReLU()))")]:
        assert found(PYG.format(imports=imports, conv=conv), "TB201", show_all=True) == [], conv


def test_pyg_layers_with_dropout_or_batchnorm_still_reported():
    for imports, conv in [("GATConv", "GATConv(c_in, hidden, dropout=0.6)"),
                          ("GINConv", "GINConv(nn.Sequential(nn.Linear(c_in, hidden), nn.BatchNorm1d(hidden)))"),
                          ("GINConv", "GINConv(mlp)")]:  # a network built elsewhere: not seen, so not mode-free
        assert found(PYG.format(imports=imports, conv=conv), "TB201") == [27], conv


MODEL = """
    import torch
    from torch_geometric.nn.models import GCN

    model = {model}
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def train(data):
        model.train()
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(data.x, data.edge_index), data.y).backward()
        optimizer.step()

    @torch.no_grad()
    def test(data):
        return model(data.x, data.edge_index).argmax(-1)
"""


def test_pyg_ready_made_models_by_their_arguments():
    assert found(MODEL.format(model="GCN(16, 64, 2, 4)"), "TB201", show_all=True) == []
    for model in ["GCN(16, 64, 2, 4, dropout=0.5)", "GCN(16, 64, 2, 4, norm='batch_norm')", "GCN(16, 64, 2, 4, 0.5)",
                  "GCN(16, 64, 2, 4, **cfg)"]:
        assert found(MODEL.format(model=model), "TB201") == [16], model


def test_a_class_of_the_file_named_like_a_pyg_layer_is_read_as_written():
    src = PYG.format(imports="GCNConv as _unused", conv="GCNConv(c_in, hidden)") + """
    class GCNConv(torch.nn.Module):
        def __init__(self, a, b):
            super().__init__()
            self.lin = nn.Linear(a, b)
            self.drop = nn.Dropout(0.5)

        def forward(self, x, edge_index):
            return self.drop(self.lin(x))
"""
    assert found(src, "TB201") == [27]


# --------------------------------------------------------------------------- TB204: a helper returning a number
HELPER = """
    import torch
    import torch.nn.functional as F

    def eval_loss(model, loader):
        model.eval()
        loss = 0
        for data in loader:
            with torch.no_grad():
                out = model(data)
            loss += {term}
        return loss / len(loader.dataset)

    def run(model, optimizer, train_loader, val_loader, epochs):
        val_losses = []
        for epoch in range(epochs):
            model.train()
            for data in train_loader:
                optimizer.zero_grad()
                F.nll_loss(model(data), data.y).backward()
                optimizer.step()
            val_losses.append(eval_loss(model, val_loader))
        return val_losses
"""


def test_a_helper_returning_a_sum_of_numbers_appended_per_epoch():
    assert found(HELPER.format(term="F.nll_loss(out, data.y, reduction='sum').item()"), "TB204", show_all=True) == []
    assert found(HELPER.format(term="F.nll_loss(model(data), data.y, reduction='sum')"), "TB204") == [22]


# --------------------------------------------------------------------------- TB115: a loop counting the length's unit
TASKS = """
    import torch

    def train(args, model, optimizer, tasks, median_num_iter):
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=median_num_iter * args.num_train_epochs)
        for epoch in range(args.num_train_epochs):
            for {loop}:
                for task in tasks:
                    loss = model(task.next_batch())
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
                sched.step()
"""


def test_tb115_a_step_per_iteration_of_the_counted_loop_over_tasks():
    """vilbert-multi-task (real mistake 211's file): the cosine's length is median_num_iter * epochs and it steps once
    per ``range(median_num_iter)`` iteration; the backward runs in a loop over tasks inside."""
    assert found(TASKS.format(loop="step in range(median_num_iter)"), "TB115", show_all=True) == []
    assert found(TASKS.format(loop="group in range(args.num_train_epochs)"), "TB115") == [13]


WINDOW = """
    def train_epoch(model, loader, optimizer, mask_steps):
        loss_his = []
        for i, batch in enumerate(loader):
            loss, loss_main = model.cal_loss(batch)
            loss_his.append(loss_main)
            if i % mask_steps == 0:
                reward = sum(loss_his) / len(loss_his)
                {cut}
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""


def test_tb204_a_list_cut_back_to_a_window_in_the_loop():
    """SSLRec's MAERec: the loss history is cut back to its last entry every mask step (bounded)."""
    assert found(WINDOW.format(cut="loss_his = loss_his[-1:]"), "TB204", show_all=True) == []
    assert found(WINDOW.format(cut="loss_his = loss_his[1:]  # drops one, keeps growing"), "TB204") == [6]
    assert found(WINDOW.format(cut="pass"), "TB204") == [6]


# --------------------------------------------------------------------------- TB403: weights_only=False on its own cache
CACHE = """
    import argparse
    import os
    import torch

    def make_dataset(args):
        data = build(args)
        name = os.path.basename(args.dataset)
        path = os.path.join(args.dataset, f"{{name}}.pt")
        torch.save(data, path)
        return data

    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset")
    args = parser.parse_args()
    name = os.path.basename(args.dataset)
    path = os.path.join(args.dataset, f"{{name}}.pt")
    if os.path.exists(path):
        data = torch.load({load})
    else:
        data = make_dataset(args)
"""


def test_tb403_weights_only_false_on_the_programs_own_cache():
    """PyG's txt2kg_rag: the dataset folder is an argument, the .pt in it is the one make_dataset() saved."""
    assert found(CACHE.format(load="path, weights_only=False"), "TB403") == []
    assert found(CACHE.format(load="path, weights_only=False"), "TB403", show_all=True) == [19]
    released = CACHE.replace('torch.save(data, path)', 'pass')
    assert found(released.format(load="path, weights_only=False"), "TB403") == [19]


# --------------------------------------------------------------------------- round 25: TB101 / TB115
ECAPA = """
    import torch

    class Model(torch.nn.Module):
        def __init__(self, lr, test_step, lr_decay):
            super().__init__()
            self.optim = torch.optim.Adam(self.parameters(), lr=lr)
            self.scheduler = torch.optim.lr_scheduler.StepLR(self.optim, step_size=test_step, gamma=lr_decay)

        def train_network(self, epoch, loader):
            self.train()
            {step}
            for data, labels in loader:
                self.zero_grad()
                self.loss(self.encoder(data), labels).backward()
                self.optim.step()
"""


def test_tb101_tb115_a_step_given_its_epoch_offset_by_one():
    """ECAPA-TDNN: ``scheduler.step(epoch - 1)`` at the top of the epoch (epochs from 1) sets the position itself, and
    ``step_size=test_step`` counts epochs (the ``step`` in the name is StepLR's own word)."""
    src = ECAPA.format(step="self.scheduler.step(epoch - 1)")
    assert found(src, "TB101", show_all=True) == [] and found(src, "TB115", show_all=True) == []
    assert found(ECAPA.format(step="self.scheduler.step()"), "TB101") == [12]


FOLDS = """
    import torch

    def train(bags, milnet, criterion, optimizer):
        for bag in bags:
            optimizer.zero_grad()
            criterion(milnet(bag.x), bag.y).backward()
            optimizer.step()

    def main(args, kf, bags_path, milnet, criterion):
        for fold, (train_index, test_index) in enumerate(kf.split(bags_path)):
            optimizer = torch.optim.Adam(milnet.parameters(), lr=args.lr)
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.num_epochs)
            for epoch in range(1, args.num_epochs + 1):
                train(train_index, milnet, criterion, optimizer)
                scheduler.step()
"""


def test_tb115_an_epoch_loop_inside_a_loop_over_folds():
    """dsmil-wsi: the cosine counted in epochs is stepped once per epoch of a loop nested in the folds' loop."""
    assert found(FOLDS, "TB115", show_all=True) == []
    per_batch = FOLDS.replace("""                train(train_index, milnet, criterion, optimizer)
                scheduler.step()""", """                for bag in train_index:
                    optimizer.zero_grad()
                    criterion(milnet(bag.x), bag.y).backward()
                    optimizer.step()
                    scheduler.step()""")
    assert found(per_batch, "TB115") == [19]


# --------------------------------------------------------------------------- round 26: TB201 / TB402
ACTOR = """
    import torch
    from torch import nn

    class Actor(nn.Module):
        def __init__(self, args):
            super().__init__()
            self.fc1 = nn.Linear(args.state_dim, args.hidden)
            self.fc2 = nn.Linear(args.hidden, args.action_dim)
            self.activate_func = [{choices}][args.use_tanh]

        def forward(self, s):
            return torch.softmax(self.fc2(self.activate_func(self.fc1(s))), dim=1)

    class PPO:
        def __init__(self, args):
            self.actor = Actor(args)
            self.optimizer = torch.optim.Adam(self.actor.parameters(), lr=3e-4)

        def update(self, s, adv):
            loss = -(self.actor(s).log() * adv).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

        def evaluate(self, s):
            return self.actor(s).detach().numpy().argmax()
"""


def test_tb201_an_activation_picked_from_a_list_of_layers():
    """Lizhi-sjtu PPO actors: Linear layers and ``[nn.ReLU(), nn.Tanh()][args.use_tanh]``: the mode changes nothing."""
    assert found(ACTOR.format(choices="nn.ReLU(), nn.Tanh()"), "TB201", show_all=True) == []
    assert found(ACTOR.format(choices="nn.ReLU(), nn.Dropout(0.1)"), "TB201") == [27]


GPUS = """
    import os
    import torch
    from torch import nn

    def generate_model(model, gpu_id):
        if len(gpu_id) > 1:
            model = model.cuda()
            model = nn.DataParallel(model, device_ids=gpu_id)
        {other}
            os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu_id[0])
            model = model.cuda()
        return model
"""


def test_tb402_the_cuda_call_on_the_other_branch():
    """MedicalNet: ``model.cuda()`` in the multi-GPU branch, the variable set in the ``else`` before any CUDA call."""
    assert found(GPUS.format(other="else:"), "TB402", show_all=True) == []
    assert found(GPUS.format(other="if len(gpu_id) == 2:"), "TB402") == [11]
