# Fixed version of ../45_deepspeech_test_without_eval.py: silent on the codes that file expects.
import torch


def train_fixed(model, criterion, optimizer, train_loader, test_loader, decoder, epochs):
    for epoch in range(epochs):
        model.train()
        for inputs, targets, sizes in train_loader:
            out = model(inputs)
            loss = criterion(out, targets, sizes)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        wer = 0.0
        with torch.no_grad():
            for inputs, targets, _sizes in test_loader:
                out = model(inputs)  # not: TB201
                wer += decoder.wer(out, targets)
        print(epoch, wer / len(test_loader))
