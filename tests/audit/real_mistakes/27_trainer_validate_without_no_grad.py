# Reconstructed after OpenNMT/OpenNMT-py issue #1141 ("torch.no_grad() in validate ?"): Trainer.validate()
# switched the model to eval mode but ran the validation batches with gradients enabled ("we forgot to include
# this during the 0.4 to 1.0 migration").
class Trainer:
    def __init__(self, model, train_loss, valid_loss, optim):
        self.model = model
        self.train_loss = train_loss
        self.valid_loss = valid_loss
        self.optim = optim

    def validate(self, valid_iter):
        self.model.eval()
        stats = []
        for batch in valid_iter:
            src, src_lengths = batch.src
            tgt = batch.tgt
            outputs, attns = self.model(src, tgt, src_lengths)  # expect: TB203
            stats.append(self.valid_loss.monolithic_compute_loss(batch, outputs, attns))
        self.model.train()
        return stats
