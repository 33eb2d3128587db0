# Fixed version of ../91_transfer_tutorial_scheduler_before_epoch.py: silent on the codes that file expects.
import copy

import torch


def train_model(model, criterion, optimizer, scheduler, dataloaders, num_epochs=25):
    best_wts = copy.deepcopy(model.state_dict())
    for _ in range(num_epochs):
        for phase in ["train", "val"]:
            if phase == "train":
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
            if phase == "train":
                scheduler.step()  # not: TB101
    model.load_state_dict(best_wts)
    return model
