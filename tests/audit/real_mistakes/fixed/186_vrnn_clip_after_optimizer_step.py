# Reconstructed after emited/VariationalRecurrentNeuralNetwork issue #3 ("grad_norm (line 32) should be before optimizer.step() (line 35)", https://github.com/emited/VariationalRecurrentNeuralNetwork/issues/3): train() in train.py called optimizer.step() and only afterwards nn.utils.clip_grad_norm_(model.parameters(), clip), so the clipping never affected an update (the next iteration zeroes the gradients). The maintainer emited replied "You are right again !"; the fix is to clip between loss.backward() and optimizer.step().
# Fixed version (clipping moved before optimizer.step(), as the maintainer agreed).
import torch
import torch.nn as nn
import torch.utils.data
from torchvision import datasets, transforms

from model import VRNN

x_dim = 28
h_dim = 100
z_dim = 16
n_layers = 1
n_epochs = 100
clip = 10
learning_rate = 1e-3
batch_size = 128
print_every = 100


def train(epoch):
    train_loss = 0
    for batch_idx, (data, _) in enumerate(train_loader):
        data = data.to(device)
        data = data.squeeze().transpose(0, 1)  # (seq, batch, elem)
        data = (data - data.min()) / (data.max() - data.min())

        # forward + backward + optimize
        optimizer.zero_grad()
        kld_loss, nll_loss, _, _ = model(data)
        loss = kld_loss + nll_loss
        loss.backward()

        # grad norm clipping
        nn.utils.clip_grad_norm_(model.parameters(), clip)  # not: TB113
        optimizer.step()

        if batch_idx % print_every == 0:
            print('Train Epoch: {} [{}/{}]\t KLD Loss: {:.6f} \t NLL Loss: {:.6f}'.format(
                epoch, batch_idx * batch_size, len(train_loader.dataset),
                kld_loss.item() / batch_size, nll_loss.item() / batch_size))

        train_loss += loss.item()

    print('====> Epoch: {} Average loss: {:.4f}'.format(epoch, train_loss / len(train_loader.dataset)))


device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
train_loader = torch.utils.data.DataLoader(
    datasets.MNIST('data', train=True, download=True, transform=transforms.ToTensor()),
    batch_size=batch_size, shuffle=True)

model = VRNN(x_dim, h_dim, z_dim, n_layers).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)

for epoch in range(1, n_epochs + 1):
    train(epoch)
