# Reconstructed after skorch-dev/skorch issue #218 ("Should use torch.no_grad in validation_step()?"), fixed by
# PR #219: validation_step() set the module to eval mode and called infer() (the module's forward) with
# gradients enabled; GPU memory grew with every validation batch.
class NeuralNet:
    def __init__(self, module, criterion, optimizer):
        self.module_ = module
        self.criterion_ = criterion
        self.optimizer_ = optimizer

    def infer(self, x):
        return self.module_(x)

    def get_loss(self, y_pred, y_true):
        return self.criterion_(y_pred, y_true)

    def train_step(self, Xi, yi):
        self.module_.train()
        self.optimizer_.zero_grad()
        loss = self.get_loss(self.infer(Xi), yi)
        loss.backward()
        self.optimizer_.step()
        return loss

    def validation_step(self, Xi, yi):
        self.module_.train(False)
        y_pred = self.infer(Xi)  # expect: TB203
        loss = self.get_loss(y_pred, yi)
        return {"loss": loss, "y_pred": y_pred}
