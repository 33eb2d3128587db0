# Reconstructed after sinhasam/vaal issue #2 ("while computing the test accuracy I do not observe the task_model in
# eval mode ... vgg16_bn which has batchnorm and dropout layers"; the maintainer: "Yes, you are completely correct
# about the issue! ... I have fixed the issue by adding the line of code"): the solver's test() measured accuracy
# with the VGG16-BN task model still in train mode.
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
        total, correct = 0, 0
        for imgs, labels in self.test_dataloader:
            with torch.no_grad():
                preds = task_model(imgs)  # expect: TB201
            preds = torch.argmax(preds, dim=1)
            correct += (preds == labels).sum().item()
            total += imgs.size(0)
        return correct / total * 100
