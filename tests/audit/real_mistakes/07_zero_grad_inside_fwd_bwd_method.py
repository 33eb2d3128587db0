# Reconstructed after pytorch/torchtitan PR #3575 ("[rl][bug] Fix gradient accumulation zero grad"): the RL
# trainer zeroed the gradients inside its forward_backward() method, called once per micro-batch by the
# controller, so only the last micro-batch reached optim_step(); fixed by zeroing in optim_step() after the step.
class PolicyTrainer:
    def __init__(self, model, optimizer, loss_fn):
        self.model = model
        self.optimizer = optimizer
        self.loss_fn = loss_fn

    def forward_backward(self, microbatch, num_microbatches):
        self.optimizer.zero_grad()  # expect: TB103
        logits = self.model(microbatch["tokens"])
        loss = self.loss_fn(logits, microbatch) / num_microbatches
        loss.backward()
        return loss.item()

    def optim_step(self):
        self.optimizer.step()


def controller_step(trainer, microbatches):
    for mb in microbatches:
        trainer.forward_backward(mb, len(microbatches))
    trainer.optim_step()
