# Fixed version of ../57_labelmodel_running_loss_keeps_graph.py: silent on the codes that file expects.
def do_estimate(model, optimizer, batches, epochs, log_fn):
    for epoch in range(epochs):
        running_loss = 0.0
        for batch in batches:
            optimizer.zero_grad()
            loss = -1 * model.get_log_likelihood(batch)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()  # not: TB204
        log_fn(epoch, running_loss / len(batches))
