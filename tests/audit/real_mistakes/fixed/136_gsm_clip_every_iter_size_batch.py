# Fixed version of ../136_gsm_clip_every_iter_size_batch.py: silent on the codes that file expects.
import torch
from torch.nn.utils import clip_grad_norm_


class AverageMeter:
    def __init__(self):
        self.sum, self.count, self.avg = 0.0, 0, 0.0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def train(train_loader, model, criterion, optimizer, epoch, args):
    losses = AverageMeter()
    model.train()
    for i, (input, target) in enumerate(train_loader):
        target = target.cuda(non_blocking=True)
        output = model(input)
        loss = criterion(output, target) / args.iter_size
        losses.update(loss.item(), input.size(0))

        loss.backward()

        if (i + 1) % args.iter_size == 0:
            if args.clip_gradient is not None:
                total_norm = clip_grad_norm_(model.parameters(), args.clip_gradient)  # not: TB109
                if total_norm > args.clip_gradient:
                    print("clipping gradient: {} with coef {}".format(total_norm, args.clip_gradient / total_norm))
            optimizer.step()
            optimizer.zero_grad()

        if i % args.print_freq == 0:
            print("Epoch: [{0}][{1}/{2}] Loss {loss.avg:.4f}".format(epoch, i, len(train_loader), loss=losses))
    return losses.avg


def main(args, model, train_loader, criterion, optimizer, lr_scheduler):
    for epoch in range(args.start_epoch, args.epochs):
        train(train_loader, model, criterion, optimizer, epoch, args)
        lr_scheduler.step()
