# Reconstructed after SeanNaren/deepspeech.pytorch PR #22 ("test in eval mode", merged: "Fix dropout when model
# is not training"): the per-epoch validation pass of train.py decoded the test set with the model still in
# training mode.


def train(model, criterion, optimizer, train_loader, test_loader, decoder, epochs):
    for epoch in range(epochs):
        model.train()
        for inputs, targets, sizes in train_loader:
            out = model(inputs)
            loss = criterion(out, targets, sizes)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        wer = 0.0
        for inputs, targets, _sizes in test_loader:
            out = model(inputs)  # expect: TB201
            wer += decoder.wer(out, targets)
        print(epoch, wer / len(test_loader))
