# Reconstructed after bifold-pathomics/xMIL issue #7 / PR #8 ("Bugfix: Softmax Computations", merged, https://github.com/bifold-pathomics/xMIL/pull/8): Classifier.validation_step() (models/utils.py) already returns softmax probabilities by default, but train_model() in toy_experiments/scripts.py applied torch.softmax again to the validation predictions before computing the validation AUC used for model selection, so the reported AUC was computed on doubly-softmaxed scores. The fix calls validation_step(batch, softmax=True) and appends the predictions as returned.
import copy

import torch
import torch.nn as nn
from sklearn.metrics import roc_auc_score


class Classifier:

    def __init__(self, model, learning_rate, weight_decay, gradient_clip=None, device=torch.device('cpu')):
        self.model = model
        self.optimizer = torch.optim.SGD(
            self.model.parameters(), lr=learning_rate, momentum=0.9, weight_decay=weight_decay)
        self.criterion = torch.nn.CrossEntropyLoss()
        self.gradient_clip = gradient_clip
        self.device = device
        self.model.to(self.device)

    def compute_loss(self, batch):
        features, bag_sizes, targets = \
            batch['features'].to(self.device), batch['bag_size'].to(self.device), batch['targets'].to(self.device)
        preds = self.model.forward_fn(features, bag_sizes)
        preds = preds.view(-1, self.model.n_classes, 1)
        loss = self.criterion(preds, targets)
        return preds, targets, loss

    def training_step(self, batch):
        self.model.train()
        self.optimizer.zero_grad()
        preds, targets, loss = self.compute_loss(batch)
        loss.backward()
        if self.gradient_clip is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.gradient_clip)
        self.optimizer.step()
        return preds.detach(), targets.detach(), loss.detach()

    def validation_step(self, batch, softmax=True):
        self.model.eval()
        preds, targets, loss = self.compute_loss(batch)
        if softmax:
            preds = nn.functional.softmax(preds, dim=1)
        return preds.detach(), targets.detach(), loss.detach(), batch['sample_ids']


def train_model(classifier, num_classes, data_loader_train, data_loader_val, batch_size,
                num_epochs=100, warmup=15, tolerance=0.0, patience=5):
    min_val_loss, stop_count = 1e9, 0
    checkpoint_best, metrics_best = None, None

    for epoch in range(num_epochs):
        train_preds, train_labels, train_loss, val_preds, val_labels, val_loss = [], [], 0, [], [], 0
        for batch in data_loader_train:
            preds, labels, loss = classifier.training_step(batch)
            train_preds.append(torch.softmax(preds[:, :, 0], dim=-1))
            train_labels.append(labels)
            train_loss += (loss.item() / batch_size)
        train_preds = torch.concat(train_preds)
        if num_classes == 2:
            train_preds = train_preds[:, -1]
        train_labels = torch.concat(train_labels)
        for batch in data_loader_val:
            preds, labels, loss, _ = classifier.validation_step(batch)
            val_preds.append(torch.softmax(preds[:, :, 0], dim=-1))  # expect: TB???
            val_labels.append(labels)
            val_loss += (loss.item() / batch_size)
        val_preds = torch.concat(val_preds)
        if num_classes == 2:
            val_preds = val_preds[:, -1]
        val_labels = torch.concat(val_labels)
        train_auc = roc_auc_score(train_labels.cpu().numpy(), train_preds.cpu().numpy(), multi_class='ovr')
        val_auc = roc_auc_score(val_labels.cpu().numpy(), val_preds.cpu().numpy(), multi_class='ovr')
        print(f"Epoch {epoch + 1}: Loss train {train_loss:.3f}, val {val_loss:.3f},  "
              f"AUC train {train_auc:.3f}, val {val_auc:.3f}")
        if epoch >= warmup:
            if val_loss < min_val_loss:
                min_val_loss = val_loss
                checkpoint_best = copy.deepcopy(classifier.model.state_dict())
                metrics_best = {'epoch': epoch + 1, 'val': {'loss': val_loss, 'auc': val_auc}}
                stop_count = 0
            elif val_loss >= min_val_loss + tolerance:
                stop_count += 1
            if stop_count >= patience:
                print("Early stopping.")
                break

    classifier.model.load_state_dict(checkpoint_best)
    return metrics_best
