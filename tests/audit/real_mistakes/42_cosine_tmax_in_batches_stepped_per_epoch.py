# Reconstructed after sthalles/SimCLR issue #8 ("'CosineAnnealingLR' never works with the wrong position of
# 'scheduler.step()'"): the scheduler is built with T_max=len(train_loader), a length in batches, but the trainer
# steps it once per epoch (after a 10-epoch warm-up), so the cosine takes len(train_loader) epochs to decay.
import torch


class SimCLR:
    def __init__(self, model, optimizer, scheduler, args):
        self.model, self.optimizer, self.scheduler, self.args = model, optimizer, scheduler, args

    def train(self, train_loader):
        for epoch_counter in range(self.args.epochs):
            for images, _ in train_loader:
                loss = self.model(images)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            if epoch_counter >= 10:
                self.scheduler.step()  # expect: TB115


def main(model, train_loader, args):
    optimizer = torch.optim.Adam(model.parameters(), args.lr, weight_decay=args.weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=len(train_loader), eta_min=0)
    SimCLR(model, optimizer, scheduler, args).train(train_loader)
