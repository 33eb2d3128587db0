# Fixed version of ../158_lion_fbpconvnet_validation_with_grad.py: silent on the codes that file expects.
import numpy as np
import torch
from torch.utils.data import DataLoader
from tqdm import tqdm


def train_fbpconvnet(model, experiment, device, epochs: int = 2, batch_size: int = 4, learning_rate: float = 1e-3,
                     validation_fname="FBPConvNet_min_val.pt"):
    lidc_dataloader = DataLoader(experiment.get_training_dataset(), batch_size, shuffle=True)
    lidc_validation = DataLoader(experiment.get_validation_dataset(), batch_size, shuffle=True)
    model = model.to(device)
    loss_fcn = torch.nn.MSELoss()
    optimiser = torch.optim.Adam(model.parameters(), lr=learning_rate, betas=(0.9, 0.99))
    steps = len(lidc_dataloader)
    min_valid_loss = np.inf
    total_loss = np.zeros(epochs)

    for epoch in range(epochs):
        model.train()
        train_loss = 0.0
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, steps)
        for sinogram, target_reconstruction in tqdm(lidc_dataloader):
            optimiser.zero_grad()
            reconstruction = model(sinogram)
            loss = loss_fcn(reconstruction, target_reconstruction)
            loss.backward()
            train_loss += loss.item()
            optimiser.step()
            scheduler.step()
        total_loss[epoch] = train_loss

        # Validation
        valid_loss = 0.0
        model.eval()
        with torch.no_grad():
            for sinogram, target_reconstruction in tqdm(lidc_validation):
                reconstruction = model(sinogram)  # not: TB203
                loss = loss_fcn(target_reconstruction, reconstruction)
                valid_loss += loss.item()

        print(f"Epoch {epoch+1} Training Loss: {train_loss / len(lidc_dataloader)} "
              f"Validation Loss: {valid_loss / len(lidc_validation)}")
        if min_valid_loss > valid_loss:
            min_valid_loss = valid_loss
            model.save(validation_fname, epoch=epoch + 1, loss=min_valid_loss)
    return total_loss
