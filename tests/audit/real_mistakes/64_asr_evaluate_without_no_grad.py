# Reconstructed after gentaiscool/end2end-asr-pytorch PR #41 ("Fix OOM issue during validation": "No need to store
# gradients during validation", merged): the trainer's validation pass over the dev sets ran the speech
# transformer's forward with gradients enabled.
import torch  # noqa: F401


def evaluate(model, valid_loader, calculate_metrics):
    model.eval()
    total_loss, total_cer = 0.0, 0.0  # noqa: F841
    for src, tgt, src_percentages, src_lengths, tgt_lengths in valid_loader:  # noqa: B007
        pred, gold, hyp_seq, gold_seq = model(src, src_lengths, tgt, verbose=False)  # expect: TB203
        loss, num_correct = calculate_metrics(pred, gold)
        total_loss += loss.item()
    return total_loss / len(valid_loader)


def train(model, optimizer, train_loader, valid_loader, calculate_metrics, epochs):
    for epoch in range(epochs):
        model.train()
        for src, tgt, src_percentages, src_lengths, tgt_lengths in train_loader:  # noqa: B007
            optimizer.zero_grad()
            pred, gold, hyp_seq, gold_seq = model(src, src_lengths, tgt, verbose=False)
            loss, num_correct = calculate_metrics(pred, gold)
            loss.backward()
            optimizer.step()
        print(epoch, evaluate(model, valid_loader, calculate_metrics))
