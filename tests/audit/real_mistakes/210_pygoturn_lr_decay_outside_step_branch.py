# Reconstructed after amoudgl/pygoturn issue #16 ("an error about the use of exp_lr_scheduler", closed-as-fixed, https://github.com/amoudgl/pygoturn/issues/16): in src/train.py the step-based LR decay `if itr > 0 and itr % args.lr_decay_step == 0: exp_lr_scheduler(...)` sat at the top of the outer while loop, but that loop runs once per sample draw while itr only advances when a full batch is `done` and an optimizer step is taken; so whenever itr hit a multiple of lr_decay_step the LR was multiplied by gamma again on every pass until the next batch completed (several times, depending on batch size). The maintainer confirmed ("Yes, you are correct") and fixed it in commit e865ce6 ("Fixes #16") by moving the decay inside the `if done:` branch, right before the optimizer step.
import os, sys
import time
import torch
from torch.autograd import Variable
from tensorboardX import SummaryWriter

from helper import get_training_batch

use_gpu = torch.cuda.is_available()
kSaveModel = 20000 # save model after every 20000 steps
batchSize = 50 # number of samples in a batch
writer = SummaryWriter()


def exp_lr_scheduler(optimizer, step, init_lr, gamma, snapshot=50000):
    """Decay learning rate by a factor of 0.1 every lr_decay_epoch epochs."""
    lr = init_lr * gamma
    if step % snapshot == 0:
        print('LR is set to {}'.format(lr))

    for param_group in optimizer.param_groups:
        param_group['lr'] = lr

    return optimizer, lr


def train_model(args, model, datasets, criterion, optimizer):

    since = time.time()
    curr_loss = 0
    lr = args.learning_rate
    running_batch_idx = 0
    running_batch = {'previmg': torch.Tensor(batchSize, 3, 227, 227),
                     'currimg': torch.Tensor(batchSize, 3, 227, 227),
                     'currbb': torch.Tensor(batchSize, 4)}

    if not os.path.isdir(args.save_directory):
        os.makedirs(args.save_directory)

    itr = 0
    while itr < args.num_batches:

        model.train()
        if itr > 0 and itr % args.lr_decay_step == 0:
            optimizer, lr = exp_lr_scheduler(optimizer, itr, lr, args.gamma)  # expect: TB???

        # train on datasets
        # usually ALOV and ImageNet
        for i, dataset in enumerate(datasets):

            running_batch, train_batch, done, running_batch_idx = get_training_batch(running_batch_idx, running_batch, dataset)
            if done:
                x1 = train_batch['previmg']
                x2 = train_batch['currimg']
                y = train_batch['currbb']
                # wrap them in Variable
                if use_gpu:
                    x1, x2, y = Variable(x1.cuda()), \
                        Variable(x2.cuda()), Variable(y.cuda(), requires_grad=False)
                else:
                    x1, x2, y = Variable(x1), Variable(x2), Variable(y, requires_grad=False)

                # zero the parameter gradients
                optimizer.zero_grad()

                # forward
                output = model(x1, x2)
                loss = criterion(output, y)

                # backward + optimize
                loss.backward()
                optimizer.step()

                # statistics
                curr_loss = loss.data[0]
                itr = itr + 1
                writer.add_scalar('train/batch_loss', curr_loss, itr)
                print('[training] step = %d/%d, loss = %f' % (itr, args.num_batches, curr_loss))
                sys.stdout.flush()

                if itr > 0 and itr % kSaveModel == 0:
                    path = args.save_directory + 'model_n_batch_' + str(itr) + '_loss_' + str(round(curr_loss, 3)) + '.pth'
                    torch.save(model.state_dict(), path)

    time_elapsed = time.time() - since
    print('Training complete in {:.0f}m {:.0f}s'.format(
        time_elapsed // 60, time_elapsed % 60))
    writer.close()
    return model
