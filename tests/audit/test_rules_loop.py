"""Loop-order rules (TB1xx): each fires on a wrong snippet at the offending line and stays silent on
the corrected one (snippets in other shapes than the rules' own docstring examples)."""

import textwrap

import pytest

from .helpers import fires, found


def test_tb101_scheduler_first_in_batch_loop():
    wrong = """
    for batch in tqdm(loader):
        sched.step()
        opt.zero_grad()
        model(batch).mean().backward()
        opt.step()
    """
    right = wrong.replace("        sched.step()\n", "") + "    sched.step()\n"
    fires("TB101", wrong, [3], right)


def test_tb101_silent_for_plateau_with_metric_and_guarded_first_epoch():
    src = """
    for epoch in range(10):
        if epoch > 0:
            scheduler.step()
        plateau.step(val_loss)
        train_one_epoch(model, loader, optimizer)
    """
    assert found(src, "TB101") == []


def test_tb102_scheduler_in_micro_batch_of_nested_loop():
    wrong = """
    for it in range(iters):
        for k in range(accum):
            (loss_fn(model(xs[k]), ys[k]) / accum).backward()
            lr_scheduler.step()
        optimizer.step()
        optimizer.zero_grad()
    """
    right = wrong.replace("            lr_scheduler.step()\n", "") + "    lr_scheduler.step()\n"
    fires("TB102", wrong, [5], right)


def test_tb103_zero_grad_unguarded_after_the_update_branch():
    wrong = """
    for i, (x, y) in enumerate(loader):
        (crit(net(x), y) / 4).backward()
        if (i + 1) % 4 == 0:
            opt.step()
        opt.zero_grad()
    """
    right = """
    for i, (x, y) in enumerate(loader):
        if i % 4 == 0:
            opt.zero_grad()
        (crit(net(x), y) / 4).backward()
        if (i + 1) % 4 == 0:
            opt.step()
    """
    fires("TB103", wrong, [6], right)


def test_tb103_silent_on_two_optimizers_gan_order():
    src = """
    for real in loader:
        d_opt.zero_grad()
        d_loss(real).backward()
        d_opt.step()
        g_opt.zero_grad()
        g_loss().backward()
        g_opt.step()
    """
    assert found(src, "TB103") == []


def test_tb104_while_loop_and_per_optimizer_check():
    wrong = """
    step = 0
    while step < n:
        loss = criterion(model(next(it)), target)
        loss.backward()
        optimizer.step()
        step += 1
    """
    right = wrong.replace("        loss.backward()", "        optimizer.zero_grad()\n        loss.backward()")
    fires("TB104", wrong, [6], right)


def test_tb104_zeroing_by_hand_or_in_closure_counts():
    src = """
    for x, y in loader:
        for p in model.parameters():
            p.grad = None
        loss_fn(model(x), y).backward()
        opt.step()
    for _ in range(5):
        def closure():
            lbfgs.zero_grad()
            out = loss_fn(model(x), y)
            out.backward()
            return out
        lbfgs.step(closure)
    """
    assert found(src, "TB104") == []


def test_tb105_nested_micro_loop_with_scaler():
    wrong = """
    for step in range(steps):
        for micro in range(grad_accum):
            with autocast():
                loss = model(x[micro]).loss
            scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
    """
    right = wrong.replace("model(x[micro]).loss", "model(x[micro]).loss / grad_accum")
    fires("TB105", wrong, [6], right)


def test_tb105_division_in_separate_statement_or_helper_is_accepted():
    src = """
    for i, batch in enumerate(loader):
        loss = compute_loss(model, batch)
        if accum > 1:
            loss /= accum
        loss.backward()
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad()
    """
    assert found(src, "TB105") == []


def test_tb106_clip_value_before_unscale_in_method():
    wrong = """
    class T:
        def step(self, loss):
            self.scaler.scale(loss).backward()
            clip_grad_value_(self.model.parameters(), 0.1)
            self.scaler.unscale_(self.opt)
            self.scaler.step(self.opt)
            self.scaler.update()
    """
    right = """
    class T:
        def step(self, loss):
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.opt)
            clip_grad_value_(self.model.parameters(), 0.1)
            self.scaler.step(self.opt)
            self.scaler.update()
    """
    fires("TB106", wrong, [5], right)


def test_tb106_silent_without_scaler_and_in_the_non_amp_branch():
    src = """
    for x, y in loader:
        opt.zero_grad()
        loss = crit(model(x), y)
        if use_amp:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
    """
    assert found(src, "TB106") == []


def test_tb107_update_only_once_per_epoch_is_too_rare():
    wrong = """
    for epoch in range(3):
        for x, y in loader:
            opt.zero_grad()
            scaler.scale(crit(model(x), y)).backward()
            scaler.step(opt)
        scaler.update()
    """
    right = wrong.replace(
        "            scaler.step(opt)\n", "            scaler.step(opt)\n            scaler.update()\n"
    )
    fires("TB107", wrong, [6], right)


def test_tb108_swa_update_per_micro_batch_and_after_step():
    wrong = """
    for i, (x, y) in enumerate(loader):
        (crit(model(x), y) / k).backward()
        swa_model.update_parameters(model)
        if i % k == k - 1:
            opt.step()
            opt.zero_grad()
    """
    right = """
    for epoch in range(epochs):
        for x, y in loader:
            opt.zero_grad()
            crit(model(x), y).backward()
            opt.step()
            ema.update(model)
        swa_model.update_parameters(model)
    """
    fires("TB108", wrong, [4], right)


def test_tb109_manual_clamp_per_micro_batch():
    wrong = """
    for i, (x, y) in enumerate(loader):
        (crit(model(x), y) / k).backward()
        for p in model.parameters():
            p.grad.clamp_(-1, 1)
        if (i + 1) % k == 0:
            opt.step()
            opt.zero_grad()
    """
    assert found(wrong, "TB109") == [5]


def test_tb110_backward_under_cuda_amp_autocast_and_not_after_it():
    wrong = """
    for x, y in loader:
        opt.zero_grad()
        with torch.cuda.amp.autocast():
            loss = crit(model(x), y)
            loss.backward()
        opt.step()
    """
    assert found(wrong, "TB110") == [6]
    assert found(wrong.replace("            loss.backward()", "        loss.backward()"), "TB110") == []
    assert found(wrong.replace("autocast()", "autocast(enabled=False)"), "TB110") == []


def test_tb111_no_sync_around_whole_loop_and_conditional_is_fine():
    wrong = """
    with ddp.no_sync():
        for i, (x, y) in enumerate(loader):
            (crit(ddp(x), y) / k).backward()
            if (i + 1) % k == 0:
                opt.step()
                opt.zero_grad()
    """
    right = """
    for i, (x, y) in enumerate(loader):
        ctx = ddp.no_sync() if (i + 1) % k else nullcontext()
        with ctx:
            (crit(ddp(x), y) / k).backward()
        if (i + 1) % k == 0:
            opt.step()
            opt.zero_grad()
    """
    fires("TB111", wrong, [2], right)


def test_tb112_both_halves():
    plain_backward = """
    for x, y in loader:
        opt.zero_grad()
        loss = crit(model(x), y)
        loss.backward()
        scaler.step(opt)
        scaler.update()
    """
    assert found(plain_backward, "TB112") == [5]
    scaled = """
    for x, y in loader:
        opt.zero_grad()
        scaled = scaler.scale(crit(model(x), y))
        scaled.backward()
        opt.step()
    """
    assert found(scaled, "TB112") == [6]


# --------------------------------------------------------------------------- step functions without a loop
def test_tb101_lightning_manual_optimisation_without_a_loop():
    wrong = """
    class Lit(L.LightningModule):
        def training_step(self, batch, batch_idx):
            opt = self.optimizers()
            sch = self.lr_schedulers()
            loss = F.cross_entropy(self(batch[0]), batch[1])
            opt.zero_grad()
            self.manual_backward(loss)
            sch.step()
            opt.step()
            return loss
    """
    right = wrong.replace(
        "            sch.step()\n            opt.step()\n", "            opt.step()\n            sch.step()\n"
    )
    fires("TB101", wrong, [9], right)


def test_tb101_train_step_function_with_scaler():
    wrong = """
    def train_step(model, x, y, optimizer, scheduler, scaler):
        optimizer.zero_grad()
        scaler.scale(loss_fn(model(x), y)).backward()
        scheduler.step()
        scaler.step(optimizer)
        scaler.update()
    """
    right = wrong.replace("        scheduler.step()\n", "") + "        scheduler.step()\n"
    fires("TB101", wrong, [5], right)


def test_tb101_step_function_silent_without_backward_or_when_guarded_for_the_previous_step():
    no_backward = """
    def resume(optimizer, scheduler):
        scheduler.step()
        optimizer.step()
    """
    guarded = """
    def training_step(self, batch, batch_idx):
        opt, sch = self.optimizers(), self.lr_schedulers()
        if batch_idx > 0:
            sch.step()
        opt.zero_grad()
        self.manual_backward(self.loss(batch))
        opt.step()
    """
    assert found(no_backward, "TB101") == [] and found(guarded, "TB101") == []


# --------------------------------------------------------------------------- accumulation split across helpers
def test_tb103_zero_grad_in_a_micro_batch_method():
    wrong = """
    class Trainer:
        def micro_step(self, x, y):
            self.opt.zero_grad()
            (F.cross_entropy(self.model(x), y) / self.accum).backward()

        def train_epoch(self, loader):
            for i, (x, y) in enumerate(loader):
                self.micro_step(x, y)
                if (i + 1) % self.accum == 0:
                    self.opt.step()
    """
    right = wrong.replace("            self.opt.zero_grad()\n", "").replace(
        "                    self.opt.step()\n",
        "                    self.opt.step()\n                    self.opt.zero_grad()\n",
    )
    fires("TB103", wrong, [4], right)


def test_tb102_scheduler_in_a_backward_helper_two_levels_down():
    wrong = """
    def backward_step(model, batch, scheduler, accum):
        (F.cross_entropy(model(batch[0]), batch[1]) / accum).backward()
        scheduler.step()

    def micro(model, batch, scheduler, accum):
        backward_step(model, batch, scheduler, accum)

    def train(model, loader, optimizer, scheduler, accum=4):
        for step, batch in enumerate(loader):
            micro(model, batch, scheduler, accum)
            if step % accum == accum - 1:
                optimizer.step()
                optimizer.zero_grad()
    """
    right = wrong.replace("        scheduler.step()\n", "").replace(
        "                optimizer.zero_grad()\n",
        "                optimizer.zero_grad()\n                scheduler.step()\n",
    )
    fires("TB102", wrong, [4], right)


def test_tb102_tb105_update_helper_that_tests_the_count_itself():
    wrong = """
    class T:
        def maybe_step(self, i):
            if (i + 1) % self.accum == 0:
                self.opt.step()
                self.opt.zero_grad()

        def train_epoch(self, loader):
            for i, (x, y) in enumerate(loader):
                loss = F.cross_entropy(self.model(x), y)
                loss.backward()
                self.sched.step()
                self.maybe_step(i)
    """
    right = (
        wrong.replace("self.model(x), y)", "self.model(x), y) / self.accum")
        .replace("                self.sched.step()\n", "")
        .replace(
            "                self.opt.zero_grad()\n",
            "                self.opt.zero_grad()\n                self.sched.step()\n",
        )
    )
    fires("TB102", wrong, [12], right)
    fires("TB105", wrong, [11], right)


def test_tb104_helper_named_optimizer_step_is_followed():
    right = """
    def optimizer_step(optimizer, scheduler):
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)

    def train(model, loader, optimizer, scheduler, accum=4):
        for step, batch in enumerate(loader):
            (loss_fn(model(batch[0]), batch[1]) / accum).backward()
            if step % accum == accum - 1:
                optimizer_step(optimizer, scheduler)
    """
    wrong = right.replace("        optimizer.zero_grad(set_to_none=True)\n", "")
    fires("TB104", wrong, [3], right)
    assert found(right, "TB103") == found(right, "TB105") == []


def test_tb105_whatever_backward_is_called_on_is_the_loss():
    wrong = """
    def run_epoch(self, loader):
        self.optimizer.zero_grad()
        for i, (images, targets) in enumerate(loader):
            loss_dict = self.detector(images, targets)
            losses = sum(v for v in loss_dict.values())
            losses.backward()
            if (i + 1) % self.accumulate == 0:
                self.optimizer.step()
                self.optimizer.zero_grad()
    """
    right = wrong.replace("sum(v for v in loss_dict.values())", "sum(v for v in loss_dict.values()) / self.accumulate")
    fires("TB105", wrong, [7], right)
    # without accumulation the same shape is fine
    assert found(wrong.replace("if (i + 1) % self.accumulate == 0:", "if True:"), "TB105") == []


@pytest.mark.parametrize("comp", ["[self.step(a, b) for a, b in loader]", "{self.step(a, b) for a, b in loader}",
                                  "{i: self.step(a, b) for i, (a, b) in enumerate(loader)}",
                                  "sum(self.step(a, b) for a, b in loader)"])
def test_tb104_step_called_from_a_comprehension_over_a_loader(comp):
    wrong = f"""
    class Trainer:
        def step(self, src, tgt):
            loss = F.cross_entropy(self.model(src), tgt)
            loss.backward()
            self.optimizer.step()
            return loss.item()

        def train_epoch(self, loader):
            losses = {comp}
            return losses
    """
    right = wrong.replace("            self.optimizer.step()\n",
                          "            self.optimizer.step()\n            self.optimizer.zero_grad()\n")
    fires("TB104", wrong, [6], right)


# --------------------------------------------------------------------------- probe 4: EMA helpers, split batches
@pytest.mark.parametrize("call", ["update_ema(ema_model, model)", "ema_update(model_ema, net)",
                                  "swa_update(swa_model, model, 0.99)", "moving_average(ema, model, decay)",
                                  "utils.update_ema_weights(self.ema, self.model)"])
def test_tb108_free_standing_average_update_per_micro_batch(call):
    wrong = f"""
    from utils import update_ema, ema_update, swa_update, moving_average
    def fit(model, net, ema, ema_model, model_ema, swa_model, loader, opt, k, decay):
        for i, (x, y) in enumerate(loader):
            (crit(model(x), y) / k).backward()
            {call}
            if (i + 1) % k == 0:
                opt.step()
                opt.zero_grad()
    """
    right = wrong.replace(f"            {call}\n", "").replace(
        "                opt.zero_grad()\n", f"                opt.zero_grad()\n                {call}\n")
    fires("TB108", wrong, [6], right)


def test_tb108_local_helper_blending_parameters_is_an_average_update():
    wrong = """
    def blend(target, source, tau=0.995):
        for tp, sp in zip(target.parameters(), source.parameters()):
            tp.data.lerp_(sp.data, 1 - tau)

    def fit(net, shadow, loader, opt, accum=4):
        for step, batch in enumerate(loader):
            (net(batch).loss / accum).backward()
            blend(shadow, net)
            if (step + 1) % accum == 0:
                opt.step()
                opt.zero_grad()
    """
    right = wrong.replace("            blend(shadow, net)\n", "").replace(
        "                opt.zero_grad()\n", "                opt.zero_grad()\n                blend(shadow, net)\n")
    fires("TB108", wrong, [9], right)
    sgd = wrong.replace("tp.data.lerp_(sp.data, 1 - tau)", "tp.data.add_(tp.grad, alpha=-tau)")
    assert found(sgd, "TB108") == []  # a hand-written optimizer step, not an average


@pytest.mark.parametrize("loop", ["for cx, cy in zip(x.chunk(n), y.chunk(n)):",
                                  "for cx, cy in zip(torch.split(x, micro_bs), torch.split(y, micro_bs)):",
                                  "for _ in range(accum_steps):"])
def test_tb105_batch_split_inside_one_step_function(loop):
    wrong = f"""
    def train_step(model, opt, x, y, n=4, micro_bs=8, accum_steps=4):
        opt.zero_grad()
        {loop}
            loss = F.mse_loss(model(cx), cy)
            loss.backward()
        opt.step()
    """
    fires("TB105", wrong, [6], wrong.replace("F.mse_loss(model(cx), cy)", "F.mse_loss(model(cx), cy) / n"))


def test_tb105_split_batch_shapes_that_are_not_unnormalised_accumulation():
    right = """
    def step(model, opt, x, y, n=4):
        opt.zero_grad()
        for cx, cy in zip(x.chunk(n), y.chunk(n)):
            F.mse_loss(model(cx), cy, reduction="sum").backward()
        for p in model.parameters():
            p.grad /= x.size(0)
        opt.step()

    def gan_step(G, D, opt_g, opt_d, z, real, n_critic=5):
        for _ in range(n_critic):
            opt_d.zero_grad()
            (D(G(z).detach()).mean() - D(real).mean()).backward()
            opt_d.step()
        opt_g.zero_grad()
        (-D(G(z)).mean()).backward()
        opt_g.step()

    def multitask(model, opt, tasks):
        opt.zero_grad()
        for name, (x, y) in tasks.items():
            F.mse_loss(model(x), y).backward()
        opt.step()
    """
    assert found(right, "TB105") == []


def test_tb103_tb109_zero_and_clip_inside_a_split_batch_loop():
    wrong = """
    def step(model, opt, x, y, n=4):
        for cx, cy in zip(x.chunk(n), y.chunk(n)):
            opt.zero_grad()
            (F.mse_loss(model(cx), cy) / n).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    """
    assert found(wrong, "TB103") == [4]
    assert found(wrong, "TB109") == [6]


def test_tb106_clip_inside_a_local_helper_reported_at_the_call():
    wrong = """
    def clamp_grads(net):
        torch.nn.utils.clip_grad_value_(net.parameters(), 0.5)

    def fit(net, loader, opt, scaler):
        for x, y in loader:
            with torch.autocast("cuda"):
                loss = net(x, y)
            scaler.scale(loss).backward()
            clamp_grads(net)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
    """
    right = wrong.replace(
        "            clamp_grads(net)", "            scaler.unscale_(opt)\n            clamp_grads(net)"
    )
    fires("TB106", wrong, [10], right)


def test_tb106_helper_that_unscales_before_clipping_is_fine():
    src = """
    class Loop:
        def _clip(self):
            self.scaler.unscale_(self.opt)
            torch.nn.utils.clip_grad_norm_(self.net.parameters(), 1.0)

        def run(self, loader):
            for x in loader:
                self.scaler.scale(self.net(x)).backward()
                self._clip()
                self.scaler.step(self.opt)
                self.scaler.update()
                self.opt.zero_grad()
    """
    assert found(src, "TB106") == []


def test_tb103_zeroing_helper_called_every_micro_batch():
    wrong = """
    class Fitter:
        def _clear(self):
            for group in self.opt.param_groups:
                for p in group["params"]:
                    p.grad = None

        def epoch(self, loader):
            for step, (x, y) in enumerate(loader):
                self._clear()
                (self.loss_fn(self.net(x), y) / self.accum).backward()
                if (step + 1) % self.accum == 0:
                    self.opt.step()
    """
    right = wrong.replace("                self._clear()\n", "").replace(
        "self.opt.step()", "self.opt.step()\n                    self._clear()")
    fires("TB103", wrong, [10], right)


def test_tb107_two_scalers_only_one_updated():
    wrong = """
    class Trainer:
        def fit(self, loader):
            for x, y in loader:
                self.opt_enc.zero_grad()
                self.opt_dec.zero_grad()
                self.scaler_enc.scale(self.enc_loss(x)).backward()
                self.scaler_dec.scale(self.dec_loss(x, y)).backward()
                self.scaler_enc.step(self.opt_enc)
                self.scaler_dec.step(self.opt_dec)
                self.scaler_enc.update()
    """
    right = wrong + "                self.scaler_dec.update()\n"
    fires("TB107", wrong, [10], right)


def test_tb104_step_function_returned_by_a_factory():
    wrong = """
    def build(net, opt):
        def update(batch):
            out = net(batch["x"])
            loss = out.pow(2).mean()
            loss.backward()
            opt.step()
        return update

    def main(net, opt, stream):
        update = build(net, opt)
        while True:
            update(next(stream))
    """
    right = wrong.replace("        def update(batch):\n", "        def update(batch):\n            opt.zero_grad()\n")
    fires("TB104", wrong, [7], right)


def test_tb105_scaler_wrapped_sum_of_loss_dict():
    wrong = """
    def run(net, data, opt, scaler, k):
        for n, (x, y) in enumerate(data):
            parts = net(x, y)
            total = sum(parts.values())
            scaler.scale(total).backward()
            if (n + 1) % k == 0:
                scaler.step(opt)
                scaler.update()
                opt.zero_grad()
    """
    right = wrong.replace("scaler.scale(total)", "scaler.scale(total / k)")
    fires("TB105", wrong, [6], right)


def test_tb103_zero_grad_in_per_batch_step_function_with_accumulation_guard():
    wrong = """
    def micro_update(net, opt, x, y, step_no, every):
        opt.zero_grad(set_to_none=True)
        (crit(net(x), y) / every).backward()
        if step_no % every == every - 1:
            opt.step()

    def epoch(net, opt, loader):
        for j, (x, y) in enumerate(loader):
            micro_update(net, opt, x, y, j, 8)
    """
    right = """
    def micro_update(net, opt, x, y, step_no, every):
        (crit(net(x), y) / every).backward()
        if step_no % every == every - 1:
            opt.step()
            opt.zero_grad(set_to_none=True)

    def epoch(net, opt, loader):
        for j, (x, y) in enumerate(loader):
            micro_update(net, opt, x, y, j, 8)
    """
    fires("TB103", wrong, [3], right)


ACCELERATE_LOOP = """
from accelerate import Accelerator
def train(model, ema, optimizer, scheduler, loader):
    accelerator = Accelerator(gradient_accumulation_steps=4)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for batch in loader:
        with accelerator.accumulate(model):
            optimizer.zero_grad()
            loss = model(**batch).loss
            accelerator.backward(loss)
            accelerator.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
        ema.update(model)
"""


def test_accelerate_accumulate_blocks_what_runs_per_micro_batch():
    # the prepared optimizer's step and accelerator.backward's division are accelerate's job; its zero_grad() is
    # skipped until the gradients sync, and then, first in the block, clears the earlier micro-batches' gradients
    # (measured with accelerate: with 2 micro-batches the update keeps the second one's gradient only)
    assert found(ACCELERATE_LOOP, "TB103") == [8] and found(ACCELERATE_LOOP, "TB105") == []
    assert found(ACCELERATE_LOOP, "TB109") == [11]  # clipping a partial sum of micro-batch gradients
    assert found(ACCELERATE_LOOP, "TB106") == []  # accelerator.clip_grad_norm_ unscales first
    assert found(ACCELERATE_LOOP, "TB102") == [13]  # the scheduler was not prepared
    assert found(ACCELERATE_LOOP, "TB108") == [14]  # the EMA outside accumulate() runs per micro-batch
    right = ACCELERATE_LOOP.replace("model, optimizer, loader = accelerator.prepare(model, optimizer, loader)",
                                    "model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, "
                                    "loader, scheduler)")
    right = right.replace("            accelerator.clip_grad_norm_", "            if accelerator.sync_gradients:\n"
                                                                   "                accelerator.clip_grad_norm_")
    right = right.replace("        ema.update(model)", "        if accelerator.sync_gradients:\n"
                                                        "            ema.update(model)")
    right = right.replace("            optimizer.zero_grad()\n", "").replace(
        "            scheduler.step()\n", "            scheduler.step()\n            optimizer.zero_grad()\n")
    for code in ("TB102", "TB103", "TB105", "TB106", "TB108", "TB109"):
        assert found(right, code, show_all=True) == [], code


def test_tb112_plain_step_after_scaler_step_steps_twice():
    wrong = """
    def train(model, opt, scaler, loader):
        for x, y in loader:
            opt.zero_grad()
            scaler.scale(loss_fn(model(x), y)).backward()
            scaler.step(opt)
            scaler.update()
            opt.step()
    """
    branches = """
    def train(model, opt, scaler, loader, use_amp):
        for x, y in loader:
            opt.zero_grad()
            if use_amp:
                scaler.scale(loss_fn(model(x), y)).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss_fn(model(x), y).backward()
                opt.step()
    """
    fires("TB112", wrong, [8], branches)


def test_tb114_loss_helper_imported_from_the_project(tmp_path):
    """A token-mean loss function of another module of the project (``from pkg.losses import lm_loss``) counts
    like a local one: low confidence when only its parameter's default drops items (packed pre-training data has
    none), high when the targets are a batch's "labels" (padded by a fine-tuning collator); a helper that sums
    stays silent."""
    from trickbag.audit.lint import lint_file

    (tmp_path / ".git").mkdir()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "losses.py").write_text(textwrap.dedent("""
    import torch.nn.functional as F
    def lm_loss(logits, labels, ignore_index=-100):
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=ignore_index)
    def lm_loss_sum(logits, labels):
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100, reduction="sum")
    """))
    train = textwrap.dedent("""
    from pkg.losses import lm_loss, lm_loss_sum
    def train(model, loader, optimizer, accum):
        for i, batch in enumerate(loader):
            x, y = batch[:, :-1], batch[:, 1:]
            loss = lm_loss(model(x), y)
            (loss / accum).backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
    """)
    path = tmp_path / "train.py"

    def findings(src: str) -> list[tuple[int, str]]:
        path.write_text(src)
        return [(f.line, f.confidence) for f in lint_file(path, select=["TB114"], show_all=True)]

    assert findings(train) == [(7, "low")]
    assert findings(train.replace("batch[:, :-1], batch[:, 1:]", 'batch["input_ids"], batch["labels"]')) \
        == [(7, "high")]
    assert findings(train.replace("lm_loss(model(x), y)", "lm_loss(model(x), y, ignore_index=0)")) == [(7, "high")]
    assert findings(train.replace("lm_loss(model(x), y)", "lm_loss(model(x), y, ignore_index=tok.pad_id)")) \
        == [(7, "high")]
    handed_on = train.replace("accum):", "accum, ignore_index=-100):", 1)
    assert findings(handed_on.replace("lm_loss(model(x), y)", "lm_loss(model(x), y, ignore_index=ignore_index)")) \
        == [(7, "low")]  # a default handed on: one label per sample may never be ignored
    assert findings(train.replace("loss = lm_loss(", "loss = lm_loss_sum(")) == []
