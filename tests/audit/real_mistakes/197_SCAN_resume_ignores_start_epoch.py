# Reconstructed after kuanghuei/SCAN PR #19 ("[BugFix] Model does not correctly resume checkpoint", merged, https://github.com/kuanghuei/SCAN/pull/19): with --resume, main() loaded start_epoch and best_rsum from the checkpoint but then reset best_rsum = 0 and looped `for epoch in range(opt.num_epochs)`, so a resumed run restarted the epoch count (and the epoch-based LR decay) from 0 and overwrote the earlier best model. The merged PR initialises best_rsum/start_epoch before the resume block, loops from start_epoch, and (after review) saves 'epoch': epoch and resumes at checkpoint['epoch'] + 1.
import argparse
import logging
import os
import shutil

import torch

import data
from model import SCAN
from vocab import deserialize_vocab


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--data_name', default='precomp')
    parser.add_argument('--vocab_path', default='./vocab/')
    parser.add_argument('--num_epochs', default=30, type=int)
    parser.add_argument('--batch_size', default=128, type=int)
    parser.add_argument('--workers', default=10, type=int)
    parser.add_argument('--learning_rate', default=.0002, type=float)
    parser.add_argument('--lr_update', default=15, type=int)
    parser.add_argument('--model_name', default='./runs/runX/checkpoint')
    parser.add_argument('--resume', default='', type=str, metavar='PATH')
    opt = parser.parse_args()

    vocab = deserialize_vocab(os.path.join(opt.vocab_path, '%s_vocab.json' % opt.data_name))
    opt.vocab_size = len(vocab)

    train_loader, val_loader = data.get_loaders(opt.data_name, vocab, opt.batch_size, opt.workers, opt)

    # Construct the model
    model = SCAN(opt)

    # optionally resume from a checkpoint
    if opt.resume:
        if os.path.isfile(opt.resume):
            print("=> loading checkpoint '{}'".format(opt.resume))
            checkpoint = torch.load(opt.resume)
            start_epoch = checkpoint['epoch']
            best_rsum = checkpoint['best_rsum']
            model.load_state_dict(checkpoint['model'])
            # Eiters is used to show logs as the continuation of another
            # training
            model.Eiters = checkpoint['Eiters']
            print("=> loaded checkpoint '{}' (epoch {}, best_rsum {})"
                  .format(opt.resume, start_epoch, best_rsum))
            validate(opt, val_loader, model)
        else:
            print("=> no checkpoint found at '{}'".format(opt.resume))

    # Train the Model
    best_rsum = 0
    for epoch in range(opt.num_epochs):  # expect: TB406
        adjust_learning_rate(opt, model.optimizer, epoch)

        # train for one epoch
        train(opt, train_loader, model, epoch, val_loader)

        # evaluate on validation set
        rsum = validate(opt, val_loader, model)

        # remember best R@ sum and save checkpoint
        is_best = rsum > best_rsum
        best_rsum = max(rsum, best_rsum)
        if not os.path.exists(opt.model_name):
            os.mkdir(opt.model_name)
        save_checkpoint({
            'epoch': epoch + 1,
            'model': model.state_dict(),
            'best_rsum': best_rsum,
            'opt': opt,
            'Eiters': model.Eiters,
        }, is_best, filename='checkpoint_{}.pth.tar'.format(epoch), prefix=opt.model_name + '/')


def train(opt, train_loader, model, epoch, val_loader):
    for i, train_data in enumerate(train_loader):
        # switch to train mode
        model.train_start()
        # Update the model
        model.train_emb(*train_data)


def validate(opt, val_loader, model):
    model.val_start()
    return model.evaluate_rsum(val_loader)


def adjust_learning_rate(opt, optimizer, epoch):
    """Sets the learning rate to the initial LR
       decayed by 10 every 30 epochs"""
    lr = opt.learning_rate * (0.1 ** (epoch // opt.lr_update))
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr


def save_checkpoint(state, is_best, filename='checkpoint.pth.tar', prefix=''):
    torch.save(state, prefix + filename)
    if is_best:
        shutil.copyfile(prefix + filename, prefix + 'model_best.pth.tar')


if __name__ == '__main__':
    logging.basicConfig(format='%(asctime)s %(message)s', level=logging.INFO)
    main()
