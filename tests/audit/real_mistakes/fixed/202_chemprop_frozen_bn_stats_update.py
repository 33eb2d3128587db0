# Reconstructed after chemprop/chemprop PR #952 ("Update batch norm freezing to freeze running stats", merged as f4755ca, https://github.com/chemprop/chemprop/pull/952; discussed in #904): with --freeze-encoder / --model-frzn, train_model() "froze" the pretrained message-passing encoder and batch-norm layer only with requires_grad_(False) (plus zeroing dropout p), so the BatchNorm running mean/variance kept being updated by the fine-tuning batches. The fix puts the frozen parts in eval mode: model.message_passing.eval(), model.bn.eval(), and .eval() on the frozen FFN blocks.
# Fixed version (the merged PR applied).
import torch
from lightning import pytorch as pl
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger

from chemprop.data import MulticomponentDataset
from chemprop.models import MPNN, MulticomponentMPNN
from chemprop.cli.utils import build_model, find_models


def train_model(
    args, train_loader, val_loader, test_loader, output_dir, output_transform, input_transforms
):
    if args.checkpoint is not None:
        model_paths = find_models(args.checkpoint)

    for model_idx in range(args.ensemble_size):
        model_output_dir = output_dir / f"model_{model_idx}"
        model_output_dir.mkdir(exist_ok=True, parents=True)

        seed = args.pytorch_seed + model_idx
        torch.manual_seed(seed)

        if args.checkpoint or args.model_frzn is not None:
            mpnn_cls = (
                MulticomponentMPNN
                if isinstance(train_loader.dataset, MulticomponentDataset)
                else MPNN
            )
            model_path = model_paths[model_idx] if args.checkpoint else args.model_frzn
            model = mpnn_cls.load_from_file(model_path)

            if args.checkpoint:
                model.apply(
                    lambda m: setattr(m, "p", args.dropout)
                    if isinstance(m, torch.nn.Dropout)
                    else None
                )

            # TODO: model_frzn is deprecated and then remove in v2.2
            if args.model_frzn or args.freeze_encoder:
                model.message_passing.apply(lambda module: module.requires_grad_(False))
                model.message_passing.eval()
                model.bn.apply(lambda module: module.requires_grad_(False))
                model.bn.eval()  # not: TB120
                for idx in range(args.frzn_ffn_layers):
                    model.predictor.ffn[idx].requires_grad_(False)
                    model.predictor.ffn[idx + 1].eval()
        else:
            model = build_model(args, train_loader.dataset, output_transform, input_transforms)

        monitor_mode = "min" if model.metrics[0].minimize else "max"
        trainer_logger = CSVLogger(model_output_dir, "trainer_logs")
        checkpointing = ModelCheckpoint(
            model_output_dir / "checkpoints",
            "best-{epoch}-{val_loss:.2f}",
            "val_loss",
            mode=monitor_mode,
            save_last=True,
        )
        patience = args.patience if args.patience is not None else args.epochs
        early_stopping = EarlyStopping("val_loss", patience=patience, mode=monitor_mode)

        trainer = pl.Trainer(
            logger=trainer_logger,
            enable_progress_bar=True,
            accelerator=args.accelerator,
            devices=args.devices,
            max_epochs=args.epochs,
            callbacks=[checkpointing, early_stopping],
            gradient_clip_val=args.grad_clip,
        )
        trainer.fit(model, train_loader, val_loader)

        if test_loader is not None:
            predss = trainer.predict(dataloaders=test_loader)
            preds = torch.concat(predss, 0)
            torch.save(preds, model_output_dir / "test_preds.pt")
