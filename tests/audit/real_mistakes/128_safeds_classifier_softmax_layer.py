# Reconstructed after Safe-DS/Library issue #581 ("Remove additional softmax function if ClassificationNeuralNetwork
# uses CategoricalCrossEntropy", labelled bug, closed with the softmax removed): the internal module built for a
# multi-class classification network ended in a softmax activation, and the fit loop trained it with
# nn.CrossEntropyLoss.
import torch
from torch import nn


class _InternalModel(nn.Module):
    def __init__(self, layers, is_for_classification):
        super().__init__()
        internal_layers = []
        for layer in layers:
            internal_layers.append(layer)
            internal_layers.append(nn.ReLU())
        internal_layers.pop()
        if is_for_classification:
            internal_layers.append(nn.Softmax(dim=-1))
        self._pytorch_layers = nn.Sequential(*internal_layers)

    def forward(self, x):
        return self._pytorch_layers(x)


class ClassificationNeuralNetwork:
    def __init__(self, layers, num_classes):
        self._model = _InternalModel(layers, is_for_classification=True)
        self._num_classes = num_classes

    def fit(self, dataloader, epoch_size=25, learning_rate=0.001):
        loss_fn = nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(self._model.parameters(), lr=learning_rate)
        self._model.train()
        for _ in range(epoch_size):
            for x, y in dataloader:
                optimizer.zero_grad()
                pred = self._model(x)
                loss = loss_fn(pred, y)  # expect: TB303
                loss.backward()
                optimizer.step()
        return self
