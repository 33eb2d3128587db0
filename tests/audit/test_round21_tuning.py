"""Recall on the kinds of mistake that round 19's fresh real mistakes (136-144) showed the rules missed: each a
planted wrong shape reported by default and its corrected shape silent, beside shapes that look alike and are
right."""

from __future__ import annotations

from tests.audit.helpers import fires, found

# facebookresearch/lingua #59: the accumulation count is kept modulo k and the update tests it against 0
LINGUA = """
    def train(args, model, optimizer, data_iterator, state):
        while state.step < args.steps:
            batch = next(data_iterator)
            state.acc_step += 1
            state.acc_step = state.acc_step % args.grad_acc_steps
            loss = model(batch) / args.grad_acc_steps
            loss.backward()
            {clip_here}
            if state.acc_step == 0:
                {clip_there}
                optimizer.step()
                optimizer.zero_grad()
                state.step += 1
"""
CLIP = "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"


def test_tb109_clip_outside_a_test_of_a_count_kept_modulo_k():
    fires("TB109", LINGUA.format(clip_here=CLIP, clip_there="pass"), [9],
          LINGUA.format(clip_here="pass", clip_there=CLIP))


def test_tb109_count_modulo_k_in_a_local_name():
    src = """
        def train(model, optimizer, loader, k):
            acc = 0
            for x in loader:
                acc = (acc + 1) % k
                model(x).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                if acc == 0:
                    optimizer.step()
                    optimizer.zero_grad()
    """
    assert found(src, "TB109") == [7]


def test_tb109_a_logging_position_modulo_is_not_an_accumulation():
    src = """
        def train(model, optimizer, loader, log_every):
            for i, x in enumerate(loader):
                pos = i % log_every
                model(x).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
                if pos == 0:
                    print(i)
    """
    assert found(src, "TB109", show_all=True) == []


# microsoft/SpareNet #12: a per-batch train_step hands the loss terms, in a list, to a meter of the file that sums them
SPARENET = """
    class AverageMeter:
        def __init__(self, n):
            self._sum = [0] * n

        def update(self, values):
            for idx, v in enumerate(values):
                self._sum[idx] += v


    class Runner:
        def __init__(self, model, optimizer):
            self.model, self.optimizer = model, optimizer
            self.losses = AverageMeter(2)

        def completion(self, data):
            coarse, refine = self.model(data)
            coarse_loss, refine_loss = coarse.mean(), refine.mean()
            return coarse_loss + refine_loss, refine_loss, coarse_loss

        def train_step(self, data):
            loss, refine_loss, coarse_loss = self.completion(data)
            self.model.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.losses.update([{a}, {b}])
"""


def test_tb204_loss_terms_in_a_list_to_a_summing_meter():
    fires("TB204", SPARENET.format(a="coarse_loss * 1000", b="refine_loss * 1000"), [26],
          SPARENET.format(a="coarse_loss.item() * 1000", b="refine_loss.item() * 1000"))


def test_tb204_meter_that_keeps_only_the_last_value_is_not_a_sum():
    src = SPARENET.format(a="coarse_loss", b="refine_loss").replace("self._sum[idx] += v", "self._sum[idx] = v")
    assert found(src, "TB204", show_all=True) == []


# horovod/horovod #641: a metric summing the Horovod-averaged loss, handed the loss tensor itself
HOROVOD = """
    import horovod.torch as hvd

    class Metric:
        def __init__(self, name):
            self.sum = torch.tensor(0.)

        def update(self, val):
            self.sum += hvd.allreduce({val})

    def train(model, optimizer, loader):
        train_loss = Metric("train_loss")
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            train_loss.update(loss)
            loss.backward()
            optimizer.step()
"""


def test_tb204_loss_summed_after_horovod_allreduce():
    fires("TB204", HOROVOD.format(val="val.cpu()"), [16], HOROVOD.format(val="val.detach().cpu()"))


def test_tb204_torch_all_reduce_in_place_returns_no_tensor():
    src = HOROVOD.format(val="val").replace("self.sum += hvd.allreduce(val)",
                                            "dist.all_reduce(val.detach())\n            self.sum += 1")
    assert found(src, "TB204", show_all=True) == []


def test_tb105_loss_divided_in_place():
    src = """
        def train(model, optimizer, loader, k):
            for i, (x, y) in enumerate(loader):
                loss = F.cross_entropy(model(x), y)
                {divide}
                loss.backward()
                if (i + 1) % k == 0:
                    optimizer.step()
                    optimizer.zero_grad()
    """
    fires("TB105", src.format(divide="print(loss)"), [6], src.format(divide="loss.div_(k)"))


# chengtan9907/OpenSTL #113: a per-step OneCycleLR whose Lightning hook sets its position to the epoch
OPENSTL = """
    class Method(LightningModule):
        def configure_optimizers(self):
            optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
            scheduler = torch.optim.lr_scheduler.OneCycleLR(
                optimizer, max_lr=self.lr, epochs=self.epochs, steps_per_epoch=self.steps_per_epoch)
            return {{"optimizer": optimizer, "lr_scheduler": {{"scheduler": scheduler, "interval": "step"}}}}

        def lr_scheduler_step(self, sched, *args):
            sched.step({arg})
"""


def test_tb115_per_step_schedule_given_the_epoch_number():
    fires("TB115", OPENSTL.format(arg="epoch=self.current_epoch"), [10], OPENSTL.format(arg=""))


def test_tb115_epoch_schedule_set_by_epoch_inside_the_batch_loop_is_right():
    src = """
        scheduler = CosineAnnealingLR(optimizer, T_max=args.epochs)
        for epoch in range(args.epochs):
            for x, y in loader:
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()
                scheduler.step({arg})
    """
    assert found(src.format(arg="epoch"), "TB115", show_all=True) == []
    assert found(src.format(arg="epoch + i / len(loader)"), "TB115", show_all=True) == []
    assert found(src.format(arg="global_step"), "TB115") == [8]
