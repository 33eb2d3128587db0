# Reconstructed after pytorch/tutorials PR #640 ("Update transfer_learning_tutorial.py": "scheduler.step() per epoch
# not per batch", merged with "thanks!"): the tutorial stepped the StepLR scheduler at the start of each training
# phase, before any optimizer.step() of the epoch (PyTorch >= 1.1 then skips the first value of the schedule).
import copy

import torch


def train_model(model, criterion, optimizer, scheduler, dataloaders, num_epochs=25):
    best_wts = copy.deepcopy(model.state_dict())
    for _ in range(num_epochs):
        for phase in ["train", "val"]:
            if phase == "train":
                scheduler.step()  # expect: TB101
                model.train()
            else:
                model.eval()
            for inputs, labels in dataloaders[phase]:
                optimizer.zero_grad()
                with torch.set_grad_enabled(phase == "train"):
                    outputs = model(inputs)
                    loss = criterion(outputs, labels)
                    if phase == "train":
                        loss.backward()
                        optimizer.step()
    model.load_state_dict(best_wts)
    return model
