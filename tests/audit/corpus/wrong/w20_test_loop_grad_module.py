import torch
from torch import nn

model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 2))
optimizer = torch.optim.Adam(model.parameters())
loss_fn = nn.CrossEntropyLoss()
train_data = [(torch.randn(8, 20), torch.randint(0, 2, (8,))) for _ in range(10)]
test_data = [(torch.randn(8, 20), torch.randint(0, 2, (8,))) for _ in range(3)]

for epoch in range(3):
    model.train()
    for xb, yb in train_data:
        optimizer.zero_grad()
        loss_fn(model(xb), yb).backward()
        optimizer.step()

model.eval()
hits = 0
for xb, yb in test_data:
    hits += (model(xb).argmax(1) == yb).sum().item()  # expect: TB203
print(hits)
