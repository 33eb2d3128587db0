# Fixed version of ../107_simpletransformers_eval_during_training.py: silent on the codes that file expects.
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
        for _ in range(self.args["num_train_epochs"]):
            for batch in train_loader:
                self.model.train()
                outputs = self.model(**batch)  # not: TB202
                loss = outputs[0]
                loss.backward()
                optimizer.step()
                scheduler.step()
                self.model.zero_grad()
                global_step += 1
                if self.args["evaluate_during_training"] and global_step % self.args["evaluate_steps"] == 0:
                    self.evaluate(eval_loader)
        return global_step
