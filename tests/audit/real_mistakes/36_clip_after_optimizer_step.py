# Reconstructed after awslabs/graphstorm issue #1366 ("possible max_grad_norm implementation error"; the same
# shape as VGraphRNN/VGRNN issue #4): every trainer clipped the gradients after optimizer.step(), when the update
# had already used them, so --max-grad-norm did nothing; the fix clips between backward() and step().
import torch


class NodePredictionTrainer:
    def __init__(self, model, optimizer, loss_func):
        self.model = model
        self.optimizer = optimizer
        self.loss_func = loss_func

    def fit(self, train_loader, num_epochs, max_grad_norm=None, grad_norm_type=2.0):
        for _epoch in range(num_epochs):
            self.model.train()
            for input_nodes, seeds, blocks, labels in train_loader:
                logits = self.model(blocks, input_nodes)
                loss = self.loss_func(logits[seeds], labels)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                if max_grad_norm is not None:
                    # TB113 clip-after-step: clip_grad_* after the step that consumed the gradients, before the
                    # next zero_grad
                    params = self.model.parameters()
                    torch.nn.utils.clip_grad_norm_(params, max_grad_norm, grad_norm_type)  # expect: TB113  # not: TB106
