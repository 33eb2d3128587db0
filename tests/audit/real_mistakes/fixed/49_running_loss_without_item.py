# Fixed version of ../49_running_loss_without_item.py: silent on the codes that file expects.


def train_fixed(model, optimizer, loader, mse_fn, ce_fn, epochs):
    for epoch in range(epochs):
        total = 0.0
        total_mse = 0.0
        for images, points, labels in loader:
            optimizer.zero_grad()
            pred_points, pred_labels = model(images)
            MSE = mse_fn(pred_points, points)
            loss = MSE + ce_fn(pred_labels, labels)
            loss.backward()
            optimizer.step()
            total += loss.item()  # not: TB204
            total_mse += MSE.item()  # not: TB204
        print(epoch, total / len(loader), total_mse / len(loader))
