# Reconstructed after kovanostra/message-passing-neural-network PR #28 ("V1.4.2", merged, https://github.com/kovanostra/message-passing-neural-network/pull/28; "Fixes bug in which the accumulation of training and validation losses was done incorrectly"): in ModelTrainer.do_train() (message_passing_nn/trainer/model_trainer.py) the helper _do_backpropagate(loss, training_loss) already returned training_loss + loss.item(), and the caller did `training_loss += self._do_backpropagate(loss, training_loss)`, so the running total was added to itself every batch (roughly doubling per batch) and the logged epoch training loss was meaningless. The merged fix accumulates `training_loss += loss.item()` in the loop and makes _do_backpropagate only run backward/step (the release also reports summed rather than batch-averaged losses).
# Fixed version (the merged PR applied).
import logging
from typing import Any

import torch as to
from torch.nn.modules.module import Module
from torch.optim.optimizer import Optimizer
from torch.utils.data.dataloader import DataLoader


class ModelTrainer:
    def __init__(self, preprocessor, device: str, normalize: bool = False) -> None:
        self.preprocessor = preprocessor
        self.device = device
        self.normalize = normalize
        self.model = None
        self.loss_function = None
        self.optimizer = None

    def do_train(self, training_data: DataLoader, epoch: int) -> float:
        training_loss = 0.0
        for features, labels in training_data:
            node_features, adjacency_matrix = features
            node_features, adjacency_matrix, labels = node_features.to(self.device), \
                                                      adjacency_matrix.to(self.device), \
                                                      labels.to(self.device)
            current_batch_size = self._get_current_batch_size(labels)
            if self.normalize:
                node_features = self.preprocessor.normalize(node_features, self.device)
                labels = self.preprocessor.normalize(labels, self.device)
            self.optimizer.zero_grad()
            outputs = self.model.forward(node_features,
                                         adjacency_matrix=adjacency_matrix,
                                         batch_size=current_batch_size)
            loss = self.loss_function(outputs, labels)
            training_loss += loss.item()  # not: TB???
            self._do_backpropagate(loss)
        self.get_logger().info('[Iteration %d] training loss: %.3f' % (epoch, training_loss))
        return training_loss

    def do_evaluate(self, evaluation_data: DataLoader, epoch: int = None) -> float:
        with to.no_grad():
            evaluation_loss = 0.0
            if len(evaluation_data):
                for features_validation, labels_validation in evaluation_data:
                    node_features, adjacency_matrix = features_validation
                    node_features, adjacency_matrix, labels_validation = node_features.to(self.device), \
                                                                         adjacency_matrix.to(self.device), \
                                                                         labels_validation.to(self.device)
                    if self.normalize:
                        node_features = self.preprocessor.normalize(node_features, self.device)
                        labels_validation = self.preprocessor.normalize(labels_validation, self.device)
                    current_batch_size = self._get_current_batch_size(labels_validation)
                    outputs = self.model.forward(node_features, adjacency_matrix, current_batch_size)
                    loss = self.loss_function(outputs, labels_validation)
                    evaluation_loss += loss.item()  # not: TB???
                if epoch is not None:
                    self.get_logger().info('[Iteration %d] validation loss: %.3f' % (epoch, evaluation_loss))
                else:
                    self.get_logger().info('Test loss: %.3f' % evaluation_loss)
            else:
                self.get_logger().warning('No evaluation data found!')
        return evaluation_loss

    def _do_backpropagate(self, loss: to.Tensor) -> None:
        loss.backward()
        self.optimizer.step()

    @staticmethod
    def _instantiate_the_loss_function(loss_function: Module) -> Module:
        return loss_function()

    def _instantiate_the_optimizer(self, optimizer: Any) -> Optimizer:
        model_parameters = list(self.model.parameters())
        try:
            optimizer = optimizer(model_parameters, lr=0.001, momentum=0.9)
        except:
            optimizer = optimizer(model_parameters, lr=0.001)
        return optimizer

    @staticmethod
    def _get_current_batch_size(features: to.Tensor) -> int:
        return len(features)

    @staticmethod
    def get_logger() -> logging.Logger:
        return logging.getLogger('message_passing_nn')
