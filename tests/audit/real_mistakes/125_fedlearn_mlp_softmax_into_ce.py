# Reconstructed after shaoxiongji/federated-learning issue #9 ("Pytorch CrossEntropy function contains softmax": the
# MLP applies a softmax activation and the local update then uses CrossEntropy, which takes logits; the maintainer:
# "Thx again! fixed."): each client's local update trained an MLP whose forward ended in nn.Softmax with
# nn.CrossEntropyLoss.
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, dim_in, dim_hidden, dim_out):
        super().__init__()
        self.layer_input = nn.Linear(dim_in, dim_hidden)
        self.relu = nn.ReLU()
        self.dropout = nn.Dropout()
        self.layer_hidden = nn.Linear(dim_hidden, dim_out)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        x = x.view(-1, x.shape[1] * x.shape[-2] * x.shape[-1])
        x = self.relu(self.dropout(self.layer_input(x)))
        x = self.layer_hidden(x)
        return self.softmax(x)


class LocalUpdate:
    def __init__(self, loader, local_ep, lr):
        self.loss_func = nn.CrossEntropyLoss()
        self.ldr_train = loader
        self.local_ep = local_ep
        self.lr = lr

    def train(self, net):
        net.train()
        optimizer = torch.optim.SGD(net.parameters(), lr=self.lr, momentum=0.5)
        epoch_loss = []
        for _ in range(self.local_ep):
            batch_loss = []
            for images, labels in self.ldr_train:
                net.zero_grad()
                log_probs = net(images)
                loss = self.loss_func(log_probs, labels)  # expect: TB303
                loss.backward()
                optimizer.step()
                batch_loss.append(loss.item())
            epoch_loss.append(sum(batch_loss) / len(batch_loss))
        return net.state_dict(), sum(epoch_loss) / len(epoch_loss)


def local_round(loader, dim_in, n_classes):
    net = MLP(dim_in, 200, n_classes)
    return LocalUpdate(loader, local_ep=5, lr=0.01).train(net)
