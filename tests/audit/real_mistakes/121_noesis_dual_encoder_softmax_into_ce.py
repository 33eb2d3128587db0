# Reconstructed after IBM/dstc-noesis issue #18 ("No need to use nn.Softmax layer when using nn.CrossEntropyLoss()";
# the maintainer: "You are correct. Like you pointed out CrossEntropyLoss already takes care of it. Will fix in next
# release"): the dual encoder's forward ended in a softmax layer and the trainer's default loss was CrossEntropyLoss.
import torch
import torch.nn as nn


class DualEncoder(nn.Module):
    def __init__(self, encoder, hidden_size):
        super().__init__()
        self.encoder = encoder
        self.M = nn.Parameter(torch.randn(hidden_size, hidden_size))
        self.final_layer = nn.Softmax(dim=1)

    def forward(self, context, responses):
        c = self.encoder(context)
        r = self.encoder(responses)
        logits = torch.einsum("bh,hk,bnk->bn", c, self.M, r)
        output = self.final_layer(logits)
        return output


class SupervisedTrainer:
    def __init__(self, loss_func=nn.CrossEntropyLoss(), batch_size=64):  # noqa: B008
        self.loss_func = loss_func
        self.batch_size = batch_size

    def train_batch(self, model, optimizer, context, responses, target):
        optimizer.zero_grad()
        output = model(context, responses)
        loss = self.loss_func(output, target)  # expect: TB303
        loss.backward()
        optimizer.step()
        return loss.item()
