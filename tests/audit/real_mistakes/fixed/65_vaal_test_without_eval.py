# Fixed version of ../65_vaal_test_without_eval.py: silent on the codes that file expects.
import torch


class Solver:
    def __init__(self, args, test_dataloader):
        self.args = args
        self.test_dataloader = test_dataloader

    def train(self, task_model, optim_task_model, train_loader, ce_loss, iterations):
        task_model.train()
        for it, (labeled_imgs, labels) in zip(range(iterations), train_loader):  # noqa: B007
            preds = task_model(labeled_imgs)
            task_loss = ce_loss(preds, labels)
            optim_task_model.zero_grad()
            task_loss.backward()
            optim_task_model.step()
        return self.test(task_model)

    def test(self, task_model):
        task_model.eval()
        total, correct = 0, 0
        for imgs, labels in self.test_dataloader:
            with torch.no_grad():
                preds = task_model(imgs)  # not: TB201
            preds = torch.argmax(preds, dim=1)
            correct += (preds == labels).sum().item()
            total += imgs.size(0)
        return correct / total * 100
