# Reconstructed after TRI-ML/packnet-sfm PR #51 ("Fix memory leak", merged: "Detach loss before appending it to
# the training output list"): the trainer appended every step's output dict, loss tensor included, to the list of
# the epoch's outputs, so every step's graph stayed alive until the end of the epoch.
def train(module, optimizer, dataloader):
    outputs = []
    for i, batch in enumerate(dataloader):
        optimizer.zero_grad()
        output = module.training_step(batch, i)
        output["loss"].backward()
        optimizer.step()
        outputs.append(output)  # expect: TB204
    return module.training_epoch_end(outputs)
