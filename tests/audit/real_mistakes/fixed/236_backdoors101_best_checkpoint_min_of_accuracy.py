# Reconstructed after ebagdasa/backdoors101 PR #26 ("Fixed save_model bug for saving best checkpoint", merged, https://github.com/ebagdasa/backdoors101/pull/26): run() in training.py passes the test accuracy returned by test() to Helper.save_model(), but save_model() treated it as a loss (best_loss = inf, keep if val_loss < best_loss), so the ".best" checkpoint was the model with the lowest accuracy. The merged fix tracks best_acc starting at 0 and saves when val_acc >= best_acc.
# Fixed version (the merged PR applied).
import logging
import torch
from shutil import copyfile
from tqdm import tqdm

logger = logging.getLogger('logger')


class Helper:
    def __init__(self, params, task, attack):
        self.params = params
        self.task = task
        self.attack = attack
        self.best_acc = float(0)  # not: TB???

    def save_model(self, model=None, epoch=0, val_acc=0):  # not: TB???
        if self.params.save_model:
            logger.info(f"Saving model to {self.params.folder_path}.")
            model_name = '{0}/model_last.pt.tar'.format(self.params.folder_path)
            saved_dict = {'state_dict': model.state_dict(),
                          'epoch': epoch,
                          'lr': self.params.lr,
                          'params_dict': self.params.to_dict()}
            self.save_checkpoint(saved_dict, False, model_name)
            if epoch in self.params.save_on_epochs:
                self.save_checkpoint(saved_dict, False,
                                     filename=f'{model_name}.epoch_{epoch}')
            if val_acc >= self.best_acc:
                self.save_checkpoint(saved_dict, False, f'{model_name}.best')
                self.best_acc = val_acc

    def save_checkpoint(self, state, is_best, filename='checkpoint.pth.tar'):
        if not self.params.save_model:
            return False
        torch.save(state, filename)
        if is_best:
            copyfile(filename, 'model_best.pth.tar')


def train(hlpr: Helper, epoch, model, optimizer, train_loader, attack=True):
    criterion = hlpr.task.criterion
    model.train()
    for i, data in tqdm(enumerate(train_loader)):
        batch = hlpr.task.get_batch(i, data)
        model.zero_grad()
        loss = hlpr.attack.compute_blind_loss(model, criterion, batch, attack)
        loss.backward()
        optimizer.step()
        if i == hlpr.params.max_batch_id:
            break


def test(hlpr: Helper, epoch, backdoor=False):
    model = hlpr.task.model
    model.eval()
    hlpr.task.reset_metrics()
    with torch.no_grad():
        for i, data in tqdm(enumerate(hlpr.task.test_loader)):
            batch = hlpr.task.get_batch(i, data)
            if backdoor:
                batch = hlpr.attack.synthesizer.make_backdoor_batch(batch, test=True, attack=True)
            outputs = model(batch.inputs)
            hlpr.task.accumulate_metrics(outputs=outputs, labels=batch.labels)
    metric = hlpr.task.report_metrics(epoch, prefix=f'Backdoor {str(backdoor):5s}. Epoch: ')
    return metric


def run(hlpr):
    acc = test(hlpr, 0, backdoor=False)
    for epoch in range(hlpr.params.start_epoch, hlpr.params.epochs + 1):
        train(hlpr, epoch, hlpr.task.model, hlpr.task.optimizer, hlpr.task.train_loader)
        acc = test(hlpr, epoch, backdoor=False)
        test(hlpr, epoch, backdoor=True)
        hlpr.save_model(hlpr.task.model, epoch, acc)
        if hlpr.task.scheduler is not None:
            hlpr.task.scheduler.step(epoch)
