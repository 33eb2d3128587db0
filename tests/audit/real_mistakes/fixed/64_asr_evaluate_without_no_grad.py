# Fixed version of ../64_asr_evaluate_without_no_grad.py: silent on the codes that file expects.
import torch


def evaluate(model, valid_loader, calculate_metrics):
    model.eval()
    total_loss, total_cer = 0.0, 0.0  # noqa: F841
    with torch.no_grad():
        for src, tgt, src_percentages, src_lengths, tgt_lengths in valid_loader:  # noqa: B007
            pred, gold, hyp_seq, gold_seq = model(src, src_lengths, tgt, verbose=False)  # not: TB203
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
