# Fixed version of ../67_ssasc_loss_dict_accumulated.py: silent on the codes that file expects.
def train_epoch(model, optimizer, dataset, epoch_loss):
    model.train()
    for data in dataset:
        optimizer.zero_grad()
        scores = model(data)
        loss = model.compute_loss(scores, data)
        loss["total"].backward()
        optimizer.step()
        for key in loss:
            epoch_loss[key] += loss[key].item()  # not: TB204
    return epoch_loss
