# Reconstructed after jokester-zzz/SSA-SC issue #2 ("The way of updating training and validation loss results in the
# continuous rising of gpu memory such as loss[key], it should be loss[key].item()"; the maintainer: "changing to
# loss[key].item() would be more elegant and reasonable. Thank you for your attention and correction."): the epoch
# loop summed every entry of the model's loss dict as tensors.
def train_epoch(model, optimizer, dataset, epoch_loss):
    model.train()
    for data in dataset:
        optimizer.zero_grad()
        scores = model(data)
        loss = model.compute_loss(scores, data)
        loss["total"].backward()
        optimizer.step()
        for key in loss:
            epoch_loss[key] += loss[key]  # expect: TB204
    return epoch_loss
