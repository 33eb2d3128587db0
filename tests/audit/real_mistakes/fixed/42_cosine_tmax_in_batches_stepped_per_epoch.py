# Fixed version of ../42_cosine_tmax_in_batches_stepped_per_epoch.py: silent on the codes that file expects.
import torch


class SimCLR:
    def __init__(self, model, optimizer, scheduler, args):
        self.model, self.optimizer, self.scheduler, self.args = model, optimizer, scheduler, args

    def train(self, train_loader):
        for _epoch_counter in range(self.args.epochs):
            for images, _ in train_loader:
                loss = self.model(images)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                self.scheduler.step()  # not: TB115


def main(model, train_loader, args):
    optimizer = torch.optim.Adam(model.parameters(), args.lr, weight_decay=args.weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=len(train_loader), eta_min=0)
    SimCLR(model, optimizer, scheduler, args).train(train_loader)
