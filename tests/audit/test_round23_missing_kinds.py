"""Rules for kinds of mistake round 23's fresh real mistakes showed and no rule covered (heldout_round23.md):
TB305 warm-up and total swapped (196), TB406 a resumed position never used (197), TB118 EMA weights copied into
the training model (198), TB119 an unshuffled training DataLoader (201).  Each: the wrong shape reported where
the mistake is, the right shapes silent (with ``--all`` too)."""

from __future__ import annotations

from tests.audit.helpers import fires, found

# --------------------------------------------------------------------------- TB305
SCHED = """
    from transformers import get_linear_schedule_with_warmup

    def build(optimizer, args, loader):
        total = args.epochs * len(loader)
        return get_linear_schedule_with_warmup(optimizer, {args})
"""


def test_tb305_warmup_and_total_swapped_by_keyword_and_by_position():
    fires("TB305", SCHED.format(args="num_warmup_steps=total, num_training_steps=args.warmup"), [6],
          SCHED.format(args="num_warmup_steps=args.warmup, num_training_steps=total"))
    fires("TB305", SCHED.format(args="total, args.warmup_steps"), [6],
          SCHED.format(args="args.warmup_steps, total"))


def test_tb305_right_shapes_that_mention_the_warmup_in_both():
    for args in ["num_warmup_steps=int(0.1 * total), num_training_steps=total",
                 "num_warmup_steps=args.warmup, num_training_steps=args.warmup + total",
                 "num_warmup_steps=warmup_steps, num_training_steps=total"]:
        assert found(SCHED.format(args=args), "TB305", show_all=True) == [], args


def test_tb305_the_old_pytorch_transformers_class():
    fires("TB305", "sched = WarmupLinearSchedule(opt, warmup_steps=t_total, t_total=args.warmup_steps)\n", [1],
          "sched = WarmupLinearSchedule(opt, warmup_steps=args.warmup_steps, t_total=t_total)\n")


# --------------------------------------------------------------------------- TB406
RESUME = """
    import torch

    def main(opt, model, optimizer, loader):
        start_epoch = 0
        if opt.resume:
            checkpoint = torch.load(opt.resume)
            model.load_state_dict(checkpoint["model"])
            optimizer.load_state_dict(checkpoint["optimizer"])
            {read}
            print("resumed at epoch {{}}".format(start_epoch))
        for epoch in range({range}):
            train_one_epoch(model, loader, optimizer, epoch)
"""


def test_tb406_a_loaded_epoch_that_is_only_printed():
    wrong = RESUME.replace("        start_epoch = 0\n", "").format(read="start_epoch = checkpoint['epoch']",
                                                                     range="opt.epochs")
    assert found(wrong, "TB406") == [11]
    right = RESUME.format(read="start_epoch = checkpoint['epoch'] + 1", range="start_epoch, opt.epochs")
    assert found(right, "TB406", show_all=True) == []


def test_tb406_not_a_resume_when_nothing_trains_after_the_load():
    src = """
        import torch

        def load_for_eval(model, path):
            ckpt = torch.load(path)
            epoch = ckpt["epoch"]
            model.load_state_dict(ckpt["state_dict"])
            print(f"loaded the model of epoch {epoch}")
            return model
    """
    assert found(src, "TB406", show_all=True) == []


def test_tb406_a_position_used_another_way_is_fine():
    src = RESUME.format(read="start_epoch = checkpoint.get('epoch')\n            scheduler.last_epoch = start_epoch",
                        range="opt.epochs")
    assert found(src, "TB406", show_all=True) == []


# --------------------------------------------------------------------------- TB118
EMA = """
    def train(args, unet, optimizer, loader, ema_unet):
        def save(step):
            {before}
            ema_unet.copy_to(unet.parameters())
            pipeline.save_pretrained(f"{{args.out}}/{{step}}")
            {after}

        for step, batch in enumerate(loader):
            loss = unet(batch).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            ema_unet.step(unet.parameters())
            if step % args.save_every == 0:
                save(step)
"""


def test_tb118_the_average_copied_in_every_n_steps_and_never_restored():
    fires("TB118", EMA.format(before="pass", after="pass"), [5],
          EMA.format(before="ema_unet.store(unet.parameters())", after="ema_unet.restore(unet.parameters())"))


def test_tb118_a_copy_after_training_is_the_export():
    src = """
        def train(unet, optimizer, loader, ema_unet, out):
            for batch in loader:
                unet(batch).mean().backward()
                optimizer.step()
                optimizer.zero_grad()
                ema_unet.step(unet.parameters())
            ema_unet.copy_to(unet.parameters())
            unet.save_pretrained(out)
    """
    assert found(src, "TB118", show_all=True) == []


# --------------------------------------------------------------------------- TB119
DATA = """
    import torch
    from lightning import LightningDataModule

    class Data(LightningDataModule):
        def _loader(self, dataset, batch_size{param}):
            return torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=4{arg})

        def train_dataloader(self):
            return self._loader(self.train_set, 32{call})

        def val_dataloader(self):
            return self._loader(self.val_set, 64)
"""


def test_tb119_a_training_loader_through_a_helper_without_shuffle():
    fires("TB119", DATA.format(param="", arg="", call=""), [10],
          DATA.format(param=", shuffle=False", arg=", shuffle=shuffle", call=", shuffle=True"))


def test_tb119_direct_and_sampler_shapes():
    direct = """
        from torch.utils.data import DataLoader

        class Model(LightningModule):
            def train_dataloader(self):
                return DataLoader(self.train_set, batch_size=16{arg})
    """
    assert found(direct.format(arg=""), "TB119") == [6]
    for arg in [", shuffle=True", ", sampler=RandomSampler(self.train_set)", ", batch_sampler=self.bucketing",
                ", **self.loader_kwargs"]:
        assert found(direct.format(arg=arg), "TB119", show_all=True) == [], arg


def test_tb119_iterable_datasets_shuffle_themselves():
    src = """
        from torch.utils.data import DataLoader, IterableDataset

        class Stream(IterableDataset):
            def __iter__(self):
                yield from shuffled_shards()

        class Model(LightningModule):
            def train_dataloader(self):
                return DataLoader(Stream(), batch_size=16)
    """
    assert found(src, "TB119", show_all=True) == []


# --------------------------------------------------------------------------- TB120
FROZEN = """
    import torch.nn.functional as F
    import torchvision

    def linear_probe(loader, optimizer, epochs):
        model = {build}
        for name, p in model.named_parameters():
            if not name.startswith("fc."):
                p.requires_grad = False
        for epoch in range(epochs):
            model.{mode}()
            for x, y in loader:
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
"""


def test_tb120_a_frozen_resnet_trained_in_train_mode():
    fires("TB120", FROZEN.format(build="torchvision.models.resnet50(weights='IMAGENET1K_V2')", mode="train"), [9],
          FROZEN.format(build="torchvision.models.resnet50(weights='IMAGENET1K_V2')", mode="eval"))


def test_tb120_a_frozen_network_without_batchnorm_is_fine():
    assert found(FROZEN.format(build="torchvision.models.vit_b_16()", mode="train"), "TB120", show_all=True) == []


def test_tb120_a_frozen_bn_layer_under_lightning():
    src = """
        import lightning.pytorch as pl

        def train_model(model, loader, frozen):
            if frozen:
                model.encoder.apply(lambda m: m.requires_grad_(False))
                model.bn.apply(lambda m: m.requires_grad_(False))
                {keep}
            trainer = pl.Trainer(max_epochs=10)
            trainer.fit(model, loader)
    """
    fires("TB120", src.format(keep="pass"), [7], src.format(keep="model.bn.eval()"))
