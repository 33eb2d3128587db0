# Fixed version of ../142_keon_seq2seq_cross_entropy_on_log_probs.py: silent on the codes that file expects.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import clip_grad_norm_


class Decoder(nn.Module):
    def __init__(self, embed_size, hidden_size, output_size):
        super().__init__()
        self.embed = nn.Embedding(output_size, embed_size)
        self.gru = nn.GRU(embed_size + hidden_size, hidden_size)
        self.out = nn.Linear(hidden_size * 2, output_size)

    def forward(self, input, last_hidden, context):
        embedded = self.embed(input).unsqueeze(0)
        output, hidden = self.gru(torch.cat([embedded, context], 2), last_hidden)
        output = self.out(torch.cat([output.squeeze(0), context.squeeze(0)], 1))
        output = F.log_softmax(output, dim=1)
        return output, hidden


def evaluate(model, val_iter, vocab_size, pad):
    model.eval()
    total_loss = 0
    with torch.no_grad():
        for b, batch in enumerate(val_iter):
            src, len_src = batch.src
            trg, len_trg = batch.trg
            src, trg = src.cuda(), trg.cuda()
            output = model(src, trg, teacher_forcing_ratio=0.0)
            loss = F.nll_loss(output[1:].view(-1, vocab_size),  # not: TB303
                              trg[1:].contiguous().view(-1),
                              ignore_index=pad)
            total_loss += loss.item()
    return total_loss / len(val_iter)


def train(e, model, optimizer, train_iter, vocab_size, grad_clip, pad):
    model.train()
    total_loss = 0
    for b, batch in enumerate(train_iter):
        src, len_src = batch.src
        trg, len_trg = batch.trg
        src, trg = src.cuda(), trg.cuda()
        optimizer.zero_grad()
        output = model(src, trg)
        loss = F.nll_loss(output[1:].view(-1, vocab_size),
                          trg[1:].contiguous().view(-1),
                          ignore_index=pad)
        loss.backward()
        clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        total_loss += loss.item()
    return total_loss / len(train_iter)
