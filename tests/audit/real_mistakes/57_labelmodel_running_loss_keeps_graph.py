# Reconstructed after BatsResearch/labelmodels issue #4 ("Memory leak in training loop": "running_loss is the sum
# of non-detached tensors ... It should be sufficient to change to running_loss += loss.item()"; the maintainer:
# "Ah, good catch. Thanks! Will merge"): the label model's _do_estimate_label_model loop kept every batch's graph
# for the epoch.
def do_estimate(model, optimizer, batches, epochs, log_fn):
    for epoch in range(epochs):
        running_loss = 0.0
        for batch in batches:
            optimizer.zero_grad()
            loss = -1 * model.get_log_likelihood(batch)
            loss.backward()
            optimizer.step()
            running_loss += loss  # expect: TB204
        log_fn(epoch, running_loss / len(batches))
