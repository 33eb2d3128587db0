# Reconstructed after yeyupiaoling/AudioClassification-Pytorch issue #2 ("StepLr", closed, https://github.com/yeyupiaoling/AudioClassification-Pytorch/issues/2): train.py built the LR scheduler as StepLR(optimizer, step_size=args.learning_rate, gamma=0.8), passing the learning rate (1e-3) as the step size, so the per-epoch decay schedule was wrong. The maintainer yeyupiaoling: "Yes, I have fixed it. Thank you for bringing it up."; commit 41cd880 adds an lr_step argument (default 10) and uses step_size=args.lr_step. (Logging/evaluation code omitted.)
# Fixed version (maintainer commit 41cd880 applied).
import argparse
import functools

import torch
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader

from reader import CustomDataset
from resnet import resnet34
from utility import add_arguments

parser = argparse.ArgumentParser(description=__doc__)
add_arg = functools.partial(add_arguments, argparser=parser)
add_arg('batch_size',       int,    32,                       'batch size')
add_arg('num_workers',      int,    4,                        'loader workers')
add_arg('num_epoch',        int,    50,                       'epochs')
add_arg('num_classes',      int,    10,                       'classes')
add_arg('learning_rate',    float,  1e-3,                     'initial learning rate')
add_arg('lr_step',          int,    10,                       'learning-rate decay step')
add_arg('train_list_path',  str,    'dataset/train_list.txt', 'train list')
args = parser.parse_args()


def train(args):
    train_dataset = CustomDataset(args.train_list_path, model='train', spec_len=128)
    train_loader = DataLoader(dataset=train_dataset, batch_size=args.batch_size, shuffle=True,
                              num_workers=args.num_workers)

    device = torch.device("cuda")
    model = resnet34(num_classes=args.num_classes)
    model.to(device)

    optimizer = torch.optim.Adam(params=model.parameters(),
                                 lr=args.learning_rate,
                                 weight_decay=5e-4)
    # learning-rate decay
    scheduler = StepLR(optimizer, step_size=args.lr_step, gamma=0.8, verbose=True)  # not: TB???

    loss = torch.nn.CrossEntropyLoss()

    for epoch in range(args.num_epoch):
        model.train()
        for batch_id, (spec_mag, label) in enumerate(train_loader):
            spec_mag = spec_mag.to(device)
            label = label.to(device).long()
            output = model(spec_mag)
            los = loss(output, label)
            optimizer.zero_grad()
            los.backward()
            optimizer.step()
        scheduler.step()


if __name__ == '__main__':
    train(args)
