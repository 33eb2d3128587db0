# Fixed version of ../141_repset_log_softmax_into_cross_entropy.py: silent on the codes that file expects.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ApproxRepSet(nn.Module):
    def __init__(self, n_hidden_sets, n_elements, d, n_classes):
        super().__init__()
        self.n_hidden_sets, self.n_elements = n_hidden_sets, n_elements
        self.Wc = nn.Parameter(torch.FloatTensor(d, n_hidden_sets * n_elements))
        self.fc1 = nn.Linear(n_hidden_sets, 32)
        self.fc2 = nn.Linear(32, n_classes)
        self.relu = nn.ReLU()
        nn.init.uniform_(self.Wc, -1.0, 1.0)

    def forward(self, X):
        t = self.relu(torch.matmul(X, self.Wc))
        t = t.view(t.size()[0], t.size()[1], self.n_elements, self.n_hidden_sets)
        t, _ = torch.max(t, dim=2)
        t = torch.sum(t, dim=1)
        out = self.relu(self.fc1(t))
        out = self.fc2(out)
        return out


def train(epoch, model, optimizer, X_train, y_train, batch_size):
    model.train()
    train_loss, count = 0.0, 0
    for i in range(0, len(X_train), batch_size):
        x, y = X_train[i:i + batch_size], y_train[i:i + batch_size]
        optimizer.zero_grad()
        output = model(x)
        loss_train = F.cross_entropy(output, y)  # not: TB303
        loss_train.backward()
        optimizer.step()
        train_loss += loss_train.item() * output.size(0)
        count += output.size(0)
    print("Epoch: {:03d} train_loss: {:.4f}".format(epoch, train_loss / count))
