# Fixed version of ../131_eat_pytorch_valid_step_with_grad.py: silent on the codes that file expects.
import torch


def train_step(model, features, labels):
    model.train()
    model.optimizer.zero_grad()
    predictions = model(features)
    loss = model.loss_func(predictions, labels)
    metric = model.metric_func(predictions, labels)
    loss.backward()
    model.optimizer.step()
    return loss.item(), metric.item()


def valid_step(model, features, labels):
    model.eval()
    with torch.no_grad():
        predictions = model(features)  # not: TB203
        loss = model.loss_func(predictions, labels)
        metric = model.metric_func(predictions, labels)
    return loss.item(), metric.item()


def train_model(model, epochs, dl_train, dl_valid):
    history = []
    for epoch in range(1, epochs + 1):
        loss_sum, metric_sum = 0.0, 0.0
        for step, (features, labels) in enumerate(dl_train, 1):  # noqa: B007
            loss, metric = train_step(model, features, labels)
            loss_sum += loss
            metric_sum += metric
        val_loss_sum, val_metric_sum = 0.0, 0.0
        for val_step, (features, labels) in enumerate(dl_valid, 1):  # noqa: B007
            val_loss, val_metric = valid_step(model, features, labels)
            val_loss_sum += val_loss
            val_metric_sum += val_metric
        history.append((epoch, loss_sum / step, metric_sum / step, val_loss_sum / val_step, val_metric_sum / val_step))
    return torch.tensor(history)
