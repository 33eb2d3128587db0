# Reconstructed after namisan/mt-dnn PR #40 ("Moving model.cuda before the optimizer construction", merged, https://github.com/namisan/mt-dnn/pull/40): MTDNNModel.__init__ built the optimizer (Adamax/Adam/SGD over named_parameters param groups, plus LR scheduler and a loaded optimizer state) while the network was still on the CPU; train.py called model.cuda() only afterwards. The PR (merged by the maintainer namisan, commit 21117f0) moved self.network.cuda() (and ema.cuda()) into __init__ before the optimizer is constructed and removed the late model.cuda() call in train.py.
# Fixed version (the merged PR applied).
import torch.nn as nn
import torch.optim as optim
from torch.optim.lr_scheduler import ReduceLROnPlateau
from module.bert_optim import Adamax
from module.my_optim import EMA
from mt_dnn.matcher import SANBertNetwork


class MTDNNModel(object):
    def __init__(self, opt, state_dict=None, num_train_step=-1):
        self.config = opt
        self.network = SANBertNetwork(opt)
        if state_dict:
            self.network.load_state_dict(state_dict['state'])
        self.mnetwork = nn.DataParallel(self.network) if opt['multi_gpu_on'] else self.network
        if opt['cuda']:
            self.network.cuda()  # not: TB???

        no_decay = ['bias', 'gamma', 'beta', 'LayerNorm.bias', 'LayerNorm.weight']
        optimizer_parameters = [
            {'params': [p for n, p in self.network.named_parameters() if not any(nd in n for nd in no_decay)], 'weight_decay': 0.01},
            {'params': [p for n, p in self.network.named_parameters() if any(nd in n for nd in no_decay)], 'weight_decay': 0.0}
        ]
        if opt['optimizer'] == 'adamax':
            self.optimizer = Adamax(optimizer_parameters, opt['learning_rate'],
                                    warmup=opt['warmup'], t_total=num_train_step,
                                    max_grad_norm=opt['grad_clipping'])
        elif opt['optimizer'] == 'adadelta':
            self.optimizer = optim.Adadelta(optimizer_parameters, opt['learning_rate'], rho=0.95)
        else:
            raise RuntimeError('Unsupported optimizer: %s' % opt['optimizer'])

        if state_dict and 'optimizer' in state_dict:
            self.optimizer.load_state_dict(state_dict['optimizer'])

        if opt.get('have_lr_scheduler', False):
            self.scheduler = ReduceLROnPlateau(self.optimizer, mode='max', factor=opt['lr_gamma'], patience=3)
        else:
            self.scheduler = None
        self.ema = None
        if opt['ema_opt'] > 0:
            self.ema = EMA(self.config['ema_gamma'], self.network)
            if opt['cuda']:
                self.ema.cuda()

    def update(self, batch_meta, batch_data):
        self.network.train()
        y = batch_data[batch_meta['label']]
        if self.config['cuda']:
            y = y.cuda(non_blocking=True)
        logits = self.mnetwork(*batch_data[:batch_meta['input_len']])
        loss = nn.functional.cross_entropy(logits, y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        if self.ema is not None:
            self.ema.update()

    def cuda(self):
        self.network.cuda()
        if self.config['ema_opt']:
            self.ema.cuda()


def main(args, opt, state_dict, num_all_batches, train_data_list):
    model = MTDNNModel(opt, state_dict=state_dict, num_train_step=num_all_batches)
    if args.freeze_layers > 0:
        model.network.freeze_layers(args.freeze_layers)

    for epoch in range(0, args.epochs):
        for train_data in train_data_list:
            train_data.reset()
            for batch_meta, batch_data in train_data:
                model.update(batch_meta, batch_data)
