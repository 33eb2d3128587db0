# Reconstructed after samuelyu2002/ImVisible issue #2 (the maintainer's answer: "Try changing all of the places
# with += loss into += loss.item() ... the computational graphs were also being stored", then committed): the
# training loop summed running_loss += loss, running_loss_MSE += MSE over the epoch.
def train(model, optimizer, loader, mse_fn, ce_fn, epochs):
    for epoch in range(epochs):
        running_loss = 0.0
        running_loss_MSE = 0.0
        for images, points, labels in loader:
            optimizer.zero_grad()
            pred_points, pred_labels = model(images)
            MSE = mse_fn(pred_points, points)
            loss = MSE + ce_fn(pred_labels, labels)
            loss.backward()
            optimizer.step()
            running_loss += loss  # expect: TB204
            running_loss_MSE += MSE  # expect: TB204
        print(epoch, running_loss / len(loader), running_loss_MSE / len(loader))
