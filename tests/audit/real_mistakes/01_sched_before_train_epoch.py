# Reconstructed after jdonnelly36/Deformable-ProtoPNet issue #6 ("UserWarning: Detected call of
# lr_scheduler.step() before optimizer.step()"): the joint-phase scheduler was stepped at the top of each
# epoch, before that epoch's training ran; the fix (commit e6a7d39) moved it after train().
import torch


def train_epoch(model, loader, optimizer, criterion):
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()


def run(model, train_loader, criterion, num_train_epochs, joint_lr_step_size):
    joint_optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    joint_lr_scheduler = torch.optim.lr_scheduler.StepLR(joint_optimizer, step_size=joint_lr_step_size, gamma=0.1)
    for epoch in range(num_train_epochs):
        print(f"epoch {epoch}")
        joint_lr_scheduler.step()  # expect: TB101
        train_epoch(model, train_loader, joint_optimizer, criterion)
