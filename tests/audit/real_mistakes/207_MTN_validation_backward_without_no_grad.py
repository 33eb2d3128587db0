# Reconstructed after henryhungle/MTN issue #7 ("Require gradient false in eval mode", closed-as-fixed, https://github.com/henryhungle/MTN/issues/7): the validation pass in train.py ran run_epoch() with model.eval() but without torch.no_grad(), and SimpleLossCompute called loss.backward() unconditionally, also when it was built with opt=None for validation; since the Noam optimizer only zeroes gradients right after its own step, the gradients of every validation batch were accumulated into .grad and added to the first training update of the next epoch. The maintainer acknowledged the report ("Thanks! I updated the code") and fixed it in commits a4dba76 (wrap the validation run_epoch call in `with torch.no_grad():`) and d310e8e (call loss.backward() only inside `if self.opt is not None:`).
import time
import logging
import random

import torch
from tqdm import tqdm

import data_handler as dh


class SimpleLossCompute:
    "A simple loss compute and train function."
    def __init__(self, generator, ae_generator, criterion, opt=None, l=1.0):
        self.generator = generator
        self.ae_generator = ae_generator
        self.criterion = criterion
        self.opt = opt
        self.l = l

    def __call__(self, x, y, norm, ae_x=None, ae_y=None, ae_norm=None):
        out = self.generator(x)
        loss = self.criterion(out.contiguous().view(-1, out.size(-1)),
                              y.contiguous().view(-1)) / norm.float()
        if ae_x is not None:
            if self.ae_generator is not None:
                ae_out = self.ae_generator(ae_x)
            else:
                ae_out = self.generator(ae_x)
            loss += self.l * self.criterion(ae_out.contiguous().view(-1, ae_out.size(-1)),
                                            ae_y.contiguous().view(-1)) / ae_norm.float()
        loss.backward()  # expect: TB???
        if self.opt is not None:
            self.opt.step()
            self.opt.optimizer.zero_grad()
        return loss.item() * norm.float()


def run_epoch(args, data, indices, vocab, epoch, model, loss_compute, eval=False):
    "Standard Training and Logging Function"
    start = time.time()
    total_tokens = 0
    total_loss = 0
    tokens = 0
    it = tqdm(range(len(indices)), desc="epoch {}/{}".format(epoch+1, args.num_epochs), ncols=0)
    for j in it:
        b = dh.make_batch(data, indices[j], vocab, separate_caption=args.separate_caption, cut_a=args.cut_a)
        out, ae_out = model.forward(b)
        ntokens_cap = (b.cap != vocab['<blank>']).data.sum()
        loss = loss_compute(out, b.trg_y, b.ntokens, ae_out, b.cap, ntokens_cap)
        total_loss += loss
        total_tokens += b.ntokens
        tokens += b.ntokens
        if (j+1) % args.report_interval == 0 and not eval:
            elapsed = time.time() - start
            print("Epoch: %d Step: %d Loss: %f Tokens per Sec: %f" %
                    (epoch+1, j+1, loss / b.ntokens.float(), float(tokens) / elapsed))
            start = time.time()
            tokens = 0
    return total_loss / total_tokens.float()


def train(args, model, model_opt, criterion, vocab, train_data, train_indices, valid_data, valid_indices):
    modelext = '.pth.tar'
    min_valid_loss = 1.0e+10
    bestmodel_num = 0
    for epoch in range(args.num_epochs):
        # start training
        random.shuffle(train_indices)
        model.train()
        train_loss = run_epoch(args, train_data, train_indices, vocab, epoch,
                  model,
                  SimpleLossCompute(model.generator, model.auto_encoder_generator,
                  criterion, opt=model_opt, l=args.loss_l))
        logging.info("epoch: %d  train loss: %f" % (epoch+1, train_loss))
        # test on validation data
        logging.info('-------validation--------')
        model.eval()
        valid_loss = run_epoch(args, valid_data, valid_indices, vocab, epoch,  # expect: TB???
                    model,
                    SimpleLossCompute(model.generator, model.auto_encoder_generator,
                    criterion, opt=None, l=args.loss_l),
                    eval=True)
        logging.info('epoch: %d validation loss: %f' % (epoch+1, valid_loss))
        # update the model and save checkpoints
        modelfile = args.model + '_' + str(epoch + 1) + modelext
        torch.save(model, modelfile)
        if min_valid_loss > valid_loss:
            bestmodel_num = epoch+1
            logging.info('validation loss reduced %.4f -> %.4f' % (min_valid_loss, valid_loss))
            min_valid_loss = valid_loss
    logging.info('the best model is epoch %d.' % bestmodel_num)
