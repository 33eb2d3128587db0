"""Per-epoch StepLR stepped after the epoch; ReduceLROnPlateau on the validation loss (correct)."""
import torch
from torch import nn


def run(model, train_loader, val_loader, num_epochs=30):
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.1)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", patience=3)
    for epoch in range(num_epochs):
        model.train()
        for inputs, targets in train_loader:
            optimizer.zero_grad()
            outputs = model(inputs)
            loss = criterion(outputs, targets)
            loss.backward()
            optimizer.step()
        scheduler.step()
        model.eval()
        val_loss = 0.0
        with torch.no_grad():
            for inputs, targets in val_loader:
                val_loss += criterion(model(inputs), targets).item()
        plateau.step(val_loss)
        torch.save(model.state_dict(), f"epoch{epoch}.pt")
