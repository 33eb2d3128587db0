# Reconstructed after ThilinaRajapakse/simpletransformers issue #739 ("model.train() should be called every step
# instead of only once"; the maintainer: "I just made a quick fix for this"): train() put the model in train mode
# once before the loop, and evaluate_during_training ran eval_model() -> evaluate(), which calls model.eval().
import torch


class ClassificationModel:
    def __init__(self, model, args):
        self.model = model
        self.args = args

    def evaluate(self, eval_loader):
        self.model.eval()
        total = 0.0
        for batch in eval_loader:
            with torch.no_grad():
                total += self.model(**batch)[0].mean().item()
        return total

    def train(self, train_loader, eval_loader, optimizer, scheduler):
        global_step = 0
        self.model.train()
        for _ in range(self.args["num_train_epochs"]):
            for batch in train_loader:
                outputs = self.model(**batch)  # also-ok: TB202
                loss = outputs[0]
                loss.backward()
                optimizer.step()
                scheduler.step()
                self.model.zero_grad()
                global_step += 1
                if self.args["evaluate_during_training"] and global_step % self.args["evaluate_steps"] == 0:
                    self.evaluate(eval_loader)  # expect: TB202
        return global_step
