# Reconstructed after davidnabergoj/torchflows issue #7 ("Replace sum of average losses per batch with average over
# entire validation set", https://github.com/davidnabergoj/torchflows/issues/7): BaseFlow.fit() computed the epoch's
# validation loss by adding up compute_batch_loss(val_batch) with the default torch.mean reduction, i.e. a sum of
# per-batch means, so the value depended on the number and sizes of validation batches (a smaller last batch
# counted as much as a full one) and best-weights / early-stopping compared a distorted quantity.  The maintainer
# replied "this has been fixed in 23d319e": batches are now summed with reduction=torch.sum and divided by len(x_val).
from copy import deepcopy

import torch
import torch.nn as nn
from tqdm import tqdm


class BaseFlow(nn.Module):
    def fit(self, x_train, n_epochs: int = 500, lr: float = 0.05, batch_size: int = 1024, w_train=None,
            x_val=None, w_val=None, keep_best_weights: bool = True, early_stopping: bool = False,
            early_stopping_threshold: int = 50, make_loader=None):
        self.train()
        train_loader = make_loader(x_train, w_train, batch_size=batch_size, shuffle=True)
        if x_val is not None:
            val_loader = make_loader(x_val, w_val, batch_size=batch_size, shuffle=True)
            best_val_loss = torch.inf
            best_epoch = 0
            best_weights = deepcopy(self.state_dict())

        def compute_batch_loss(batch_, reduction=torch.mean):
            batch_x, batch_weights = batch_[:2]
            batch_log_prob = self.log_prob(batch_x)
            return -reduction(batch_log_prob * batch_weights) / self.event_size

        optimizer = torch.optim.AdamW(self.parameters(), lr=lr)
        for epoch in tqdm(range(n_epochs), desc="Fitting NF"):
            for train_batch in train_loader:
                optimizer.zero_grad()
                train_loss = compute_batch_loss(train_batch, reduction=torch.mean)
                train_loss += self.regularization()
                train_loss.backward()
                optimizer.step()

            if x_val is not None:
                with torch.no_grad():
                    val_loss = 0.0
                    for val_batch in val_loader:
                        val_loss += compute_batch_loss(val_batch, reduction=torch.mean)  # expect: TB114
                    val_loss += self.regularization()

                    if val_loss < best_val_loss:
                        best_val_loss = val_loss
                        best_epoch = epoch
                        if keep_best_weights:
                            best_weights = deepcopy(self.state_dict())
                    if early_stopping and epoch - best_epoch > early_stopping_threshold:
                        break

        if x_val is not None and keep_best_weights:
            self.load_state_dict(best_weights)
        self.eval()
