# Reconstructed after Lightning-AI/pytorch-lightning issue #1476 ("Learning rate scheduler should step after each
# optimizer step", https://github.com/Lightning-AI/pytorch-lightning/issues/1476): the trainer's run_training_epoch
# called self.update_learning_rates(interval='step') after every training batch, while run_training_batch only
# stepped the optimizer every accumulate_grad_batches batches, so with accumulate_grad_batches=16 a 16000-step warmup
# finished after 1000 optimizer steps.  Maintainer williamFalcon: "good point. it should be every backward pass";
# the training loop was changed to update 'step'-interval schedulers only when
# (batch_idx + 1) % accumulate_grad_batches == 0.
class TrainerTrainLoopMixin:
    accumulate_grad_batches: int
    num_training_batches: int
    global_step: int
    lr_schedulers: list
    optimizers: list

    def run_training_epoch(self, train_dataloader, model):
        outputs = []
        for batch_idx, batch in enumerate(train_dataloader):
            if batch_idx >= self.num_training_batches:
                break
            self.batch_idx = batch_idx
            model.global_step = self.global_step

            batch_result, batch_output = self.run_training_batch(batch, batch_idx, model)
            outputs.append(batch_output)
            early_stop_epoch = batch_result == -1

            # update lr
            self.update_learning_rates(interval="step")  # expect: TB102

            if early_stop_epoch:
                break
        self.update_learning_rates(interval="epoch")
        return outputs

    def run_training_batch(self, batch, batch_idx, model):
        for opt_idx, optimizer in enumerate(self.optimizers):
            output = model.training_step(batch, batch_idx)
            loss = output["loss"] / self.accumulate_grad_batches
            loss.backward()
            # gradient update with accumulated gradients
            if (self.batch_idx + 1) % self.accumulate_grad_batches == 0:
                model.optimizer_step(self.current_epoch, batch_idx, optimizer, opt_idx)
                model.optimizer_zero_grad(self.current_epoch, batch_idx, optimizer, opt_idx)
                self.global_step += 1
        return 0, output

    def update_learning_rates(self, interval: str):
        for lr_scheduler in self.lr_schedulers:
            if lr_scheduler["interval"] == interval:
                lr_scheduler["scheduler"].step()
