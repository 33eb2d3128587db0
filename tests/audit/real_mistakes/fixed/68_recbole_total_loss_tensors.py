# Fixed version of ../68_recbole_total_loss_tensors.py: silent on the codes that file expects.
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
            total_loss = loss.item() if total_loss is None else total_loss + loss.item()  # not: TB204
            loss.backward()
            self.optimizer.step()
        return total_loss
