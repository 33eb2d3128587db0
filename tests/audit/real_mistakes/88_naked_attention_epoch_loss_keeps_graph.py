# Reconstructed after jostmey/NakedAttention issue #1 ("Memory issues caused by += with pytorch graph objects":
# e_train += e_batch/len(loader_train) builds a graph that grows every batch; the author: "Fixed. Thanks!!"):
# the epoch's mean loss and accuracy were summed from tensors that carry their graphs.
import torch


def run_epochs(model, optimizer, loader_train, num_epochs):
    for _ in range(num_epochs):
        e_train = 0.0
        a_train = 0.0
        for x_batch, y_batch in loader_train:
            logits = model(x_batch)
            e_batch = torch.nn.functional.cross_entropy(logits, y_batch)
            a_batch = (logits.argmax(1) == y_batch).float().mean()
            optimizer.zero_grad()
            e_batch.backward()
            optimizer.step()
            e_train += e_batch / len(loader_train)  # expect: TB204
            a_train += a_batch / len(loader_train)
        print(float(e_train), float(a_train))
