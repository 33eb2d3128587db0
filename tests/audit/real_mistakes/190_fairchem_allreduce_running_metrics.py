# Reconstructed after facebookresearch/fairchem PR #75 ("Fixed metric computation bug in DistributedForcesTrainer", merged as 66609d5, https://github.com/facebookresearch/fairchem/pull/75): _compute_metrics all-reduced the evaluator's running "total"/"numel" sums after every validation batch and fed the reduced values back in as prev_metrics, so each batch re-summed the already-summed totals across ranks and the counts grew exponentially (Inf metrics under DDP). The fix accumulates local totals over the whole loader and all-reduces once at the end of validate().
import torch

from ocpmodels.common import distutils
from ocpmodels.modules.evaluator import Evaluator
from ocpmodels.trainers.base_trainer import BaseTrainer


class DistributedForcesTrainer(BaseTrainer):
    def train(self):
        for epoch in range(self.config["optim"]["max_epochs"]):
            self.model.train()
            for i, batch in enumerate(self.train_loader):
                out = self._forward(batch)
                loss = self._compute_loss(out, batch)
                self._backward(loss)

                self.metrics = self._compute_metrics(out, batch, self.evaluator)
                self.metrics = self.evaluator.update("loss", loss.item(), self.metrics)

            if self.val_loader is not None:
                self.validate(split="val", epoch=epoch)

    def validate(self, split="val", epoch=None):
        print("### Evaluating on {}.".format(split))

        self.model.eval()
        evaluator, metrics = Evaluator(task="s2ef"), {}

        loader = self.val_loader if split == "val" else self.test_loader

        for i, batch in enumerate(loader):
            # Forward.
            out = self._forward(batch)
            loss = self._compute_loss(out, batch)
            total_loss = distutils.all_reduce(loss, average=True)

            # Compute metrics.
            metrics = self._compute_metrics(out, batch, evaluator, metrics)
            metrics = evaluator.update("loss", total_loss.item(), metrics)

        log_dict = {k: metrics[k]["metric"] for k in metrics}
        log_dict.update({"epoch": epoch + 1})
        if distutils.is_master():
            log_str = ["{}: {:.4f}".format(k, v) for k, v in log_dict.items()]
            print(", ".join(log_str))

        if self.logger is not None and epoch is not None:
            self.logger.log(
                log_dict,
                step=(epoch + 1) * len(self.train_loader),
                split=split,
            )

        return metrics

    def _compute_metrics(self, out, batch_list, evaluator, metrics={}):
        target = {
            "energy": torch.cat([batch.y.to(self.device) for batch in batch_list], dim=0),
            "forces": torch.cat([batch.force.to(self.device) for batch in batch_list], dim=0),
        }

        if self.config["task"].get("eval_on_free_atoms", True):
            fixed = torch.cat([batch.fixed.to(self.device) for batch in batch_list])
            mask = fixed == 0
            out["forces"] = out["forces"][mask]
            target["forces"] = target["forces"][mask]

        if self.config["dataset"].get("normalize_labels", True):
            out["energy"] = self.normalizers["target"].denorm(out["energy"])
            out["forces"] = self.normalizers["grad_target"].denorm(out["forces"])

        metrics = evaluator.eval(out, target, prev_metrics=metrics)

        aggregated_metrics = {}
        for k in metrics:
            aggregated_metrics[k] = {
                "total": distutils.all_reduce(  # expect: TB???
                    metrics[k]["total"], average=False, device=self.device
                ),
                "numel": distutils.all_reduce(
                    metrics[k]["numel"], average=False, device=self.device
                ),
            }
            aggregated_metrics[k]["metric"] = (
                aggregated_metrics[k]["total"] / aggregated_metrics[k]["numel"]
            )

        return aggregated_metrics
