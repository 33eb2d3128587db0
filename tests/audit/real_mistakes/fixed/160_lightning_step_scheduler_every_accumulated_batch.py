# Fixed version of ../160_lightning_step_scheduler_every_accumulated_batch.py: silent on the codes that file expects.
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

            # update lr only when the accumulated gradients were actually applied
            if (self.batch_idx + 1) % self.accumulate_grad_batches == 0:
                self.update_learning_rates(interval="step")  # not: TB102

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
