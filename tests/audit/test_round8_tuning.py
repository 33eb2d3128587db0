"""Planted cases for the round-8 false-alarm kinds (benchmarks/lint_corpus/heldout_round8.md), tuned on after
round 8 was measured: each shape stays silent by default, its true neighbour is still reported."""

from __future__ import annotations

from tests.audit.helpers import found


def test_tb403_a_save_load_method_pair_of_one_class_reloads_its_own_file():
    src = '''
class Agent:
    def save(self, checkpoint_path):
        torch.save(self.policy.state_dict(), checkpoint_path)

    def load(self, checkpoint_path):
        self.policy.load_state_dict(torch.load(checkpoint_path, map_location="cpu"))
'''
    assert found(src, "TB403", torch="old") == []
    # a classmethod that builds a new object from a caller's file is a library's public loader: reported
    api = src.replace("    def load(self, checkpoint_path):\n        self.policy.load_state_dict(",
                      "    @classmethod\n    def load(cls, checkpoint_path):\n        return (")
    assert found(api, "TB403", torch="old") == [] and found(api, "TB403", torch="old", show_all=True) == [8]
    # no save method writing that path: the caller's file
    alone = src.replace("torch.save(self.policy.state_dict(), checkpoint_path)", "pass")
    assert found(alone, "TB403", torch="old") == [] and found(alone, "TB403", torch="old", show_all=True) == [7]


def test_tb403_a_save_mistyped_as_a_load_names_its_own_literal_path():
    src = '''
def load(self):
    torch.load(self.policy_net.state_dict(), "./SAC_model/policy_net.pth")
'''
    assert found(src, "TB403", torch="old") == []
    outside = src.replace('"./SAC_model/policy_net.pth"', "args.ckpt")
    assert found(outside, "TB403", torch="old") == [3]


def test_tb403_a_resume_branch_restoring_the_optimizer_is_the_programs_own_checkpoint():
    src = '''
class Trainer:
    def train(self, model, loader):
        for x in loader:
            self.optimizer.zero_grad()
            model(x).sum().backward()
            self.optimizer.step()

    def resume_train(self, model):
        if self.args.resume:
            ckpt_file = self.args.ckpt or os.path.join(self.file_name, "latest_ckpt.pth")
            ckpt = torch.load(ckpt_file, map_location=self.device)
            model.load_state_dict(ckpt["model"])
            self.optimizer.load_state_dict(ckpt["optimizer"])
            self.start_epoch = ckpt["start_epoch"]
        elif self.args.ckpt is not None:
            ckpt = torch.load(self.args.ckpt, map_location=self.device)
            model.load_state_dict(ckpt["model"])
        return model
'''
    # the --resume branch is the trainer's own checkpoint; the fine-tuning branch loads a user's file
    assert found(src, "TB403", torch="old") == [17]


def test_tb204_a_dict_of_loss_tensors_and_a_conditional_running_sum():
    src = '''
def train_epoch(model, optimizer, dataset, epoch_loss):
    total = None
    for data in dataset:
        optimizer.zero_grad()
        loss = model.compute_loss(model(data), data)
        loss["total"].backward()
        optimizer.step()
        for key in loss:
            epoch_loss[key] += loss[key]{item}
        total = loss["total"]{item} if total is None else total + loss["total"]{item}
    return epoch_loss, total
'''
    assert found(src.format(item=""), "TB204") == [10, 11]
    assert found(src.format(item=".item()"), "TB204") == []


def test_tb115_onecycle_total_steps_counted_in_epochs():
    src = '''
def train(model, loss_fn, loader, max_epoch, lr):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps={total})
    for epoch in range(max_epoch):
        for batch in loader:
            optimizer.zero_grad()
            loss_fn(model(batch)).backward()
            optimizer.step()
            scheduler.step()
'''
    assert found(src.format(total="max_epoch"), "TB115") == [10]
    assert found(src.format(total="max_epoch * len(loader)"), "TB115") == []
    assert found(src.format(total="total_steps"), "TB115") == []
