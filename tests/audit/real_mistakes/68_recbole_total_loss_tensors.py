# Reconstructed after RUCAIBox/RecBole PR #307 ("FIX: bug of storing loss in each batch cause out of memory in
# Trainer", merged): Trainer._train_epoch summed the batch losses as tensors over the whole epoch, keeping every
# batch's graph alive until the epoch ended.
class Trainer:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer

    def _train_epoch(self, train_data, epoch_idx):
        self.model.train()
        total_loss = None
        for batch_idx, interaction in enumerate(train_data):  # noqa: B007
            self.optimizer.zero_grad()
            loss = self.model.calculate_loss(interaction)
            total_loss = loss if total_loss is None else total_loss + loss  # expect: TB204
            loss.backward()
            self.optimizer.step()
        return total_loss
