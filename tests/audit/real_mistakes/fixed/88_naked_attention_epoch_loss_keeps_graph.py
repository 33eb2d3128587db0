# Fixed version of ../88_naked_attention_epoch_loss_keeps_graph.py: silent on the codes that file expects.
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
            e_train += e_batch.detach() / len(loader_train)  # not: TB204
            a_train += a_batch.detach() / len(loader_train)
        print(float(e_train), float(a_train))
