def train(model, loader, criterion, optimizer, epochs=3):
    for epoch in range(epochs):
        for i, data in enumerate(loader, 0):
            inputs, labels = data
            outputs = model(inputs)
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()  # expect: TB104
