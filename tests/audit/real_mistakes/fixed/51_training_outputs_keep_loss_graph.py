# Fixed version of ../51_training_outputs_keep_loss_graph.py: silent on the codes that file expects.
def train(module, optimizer, dataloader):
    outputs = []
    for i, batch in enumerate(dataloader):
        optimizer.zero_grad()
        output = module.training_step(batch, i)
        output["loss"].backward()
        optimizer.step()
        output["loss"] = output["loss"].detach()
        outputs.append(output)  # not: TB204
    return module.training_epoch_end(outputs)
