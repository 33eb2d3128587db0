# Reconstructed after FlyreelAI/sesemi issue #36 ("Batch norm weights not updated when using EMA in fully supervised mode", closed-as-fixed, labelled bug, https://github.com/FlyreelAI/sesemi/issues/36) / PR #44 ("Fixes EMA update in fully supervised mode", merged, https://github.com/FlyreelAI/sesemi/pull/44): Classifier._ema_update() in sesemi/learners.py, called after every training step for the EMA backbone and head, averaged only ema_module.parameters(), so the BatchNorm running_mean/running_var buffers of the EMA copies were never taken from the trained model and the EMA model that is validated and checkpointed used batch-norm statistics that did not track training. The merged fix averages the whole state_dict (floating-point tensors EMA-averaged, integer buffers such as num_batches_tracked copied; the rewritten update also no longer applies the step-based decay warm-up).
# Fixed version (the merged PR applied).
from typing import NamedTuple, Optional

import copy
import torch
import torch.nn.functional as F
import pytorch_lightning as pl


class ValidationOutputs(NamedTuple):
    features: torch.Tensor
    logits: Optional[torch.Tensor] = None
    probabilities: Optional[torch.Tensor] = None
    loss: Optional[torch.Tensor] = None


class Classifier(pl.LightningModule):
    def _copy_and_detach(self, module):
        if module is None:
            return None

        new_module = copy.deepcopy(module)
        for param in new_module.parameters():
            param.detach_()
        return new_module

    def _ema_update(self, ema_module, module, step, decay):
        for ema_state, state in zip(  # not: TB???
            ema_module.state_dict().values(), module.state_dict().values()
        ):
            if ema_state.dtype.is_floating_point:
                ema_state.data.mul_(decay).add_(state.data, alpha=(1.0 - decay))
            else:
                ema_state.data.copy_(state.data)

    def training_step_end(self, outputs):
        losses = []
        if "loss" in outputs:
            _, weighted_loss, _ = self._compute_weighted_training_loss(
                loss=outputs["loss"],
                reduction=self.loss_reduction_method,
                scheduler=self.loss_scheduler,
                scale_factor=self.hparams.model.loss.scale_factor,
                log_prefix="train/supervised",
            )
            losses.append(weighted_loss)

        loss = torch.sum(torch.stack(losses))

        if "probabilities" in outputs and "targets" in outputs:
            self.training_accuracy.update(outputs["probabilities"], outputs["targets"])

        self.log("train/loss", loss)

        if self.ema is not None:
            self._ema_update(
                self.backbone_ema, self.backbone, self.global_step, self.ema.decay
            )
            self._ema_update(self.head_ema, self.head, self.global_step, self.ema.decay)

        return loss

    def compute_validation_outputs(
        self, inputs, targets, backbone, head
    ) -> Optional[ValidationOutputs]:
        features = backbone(inputs)
        if head is not None:
            logits = head(features)
            probabilities = torch.softmax(logits, dim=-1)
            loss = F.cross_entropy(logits, targets, reduction="none")
            return ValidationOutputs(
                features=features,
                logits=logits,
                probabilities=probabilities,
                loss=loss,
            )
        else:
            return ValidationOutputs(
                features=features,
            )

    def validation_step(self, batch, batch_index):
        inputs_t, targets_t = batch

        regular_outputs = self.compute_validation_outputs(
            inputs_t, targets_t, self.backbone, self.head
        )

        ema_outputs = (
            self.compute_validation_outputs(
                inputs_t, targets_t, self.backbone_ema, self.head_ema
            )
            if self.ema is not None
            else None
        )

        return targets_t, regular_outputs, ema_outputs
