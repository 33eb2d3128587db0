# Reconstructed after JulianKlug/PerfusionCT-Net issue #26 ("Correct implementation of EarlyStopper", closed-as-fixed, https://github.com/JulianKlug/PerfusionCT-Net/issues/26) / PR #27 ("Fixed early stopping", merged, https://github.com/JulianKlug/PerfusionCT-Net/pull/27): in train_segmentation.py both model.update_validation_state(epoch) (which records the "best" validation loss/epoch and sets model.is_improving, used to decide whether to save the checkpoint) and early_stopper.update(model, epoch) were called inside the validation *batch* loop, each on the loss of the current batch only, so the best-model selection and the patience counter advanced once per validation batch on single-batch losses instead of once per epoch on the epoch's validation loss ("EarlyStopper is called on every batch instead of on every epoch"). The merged fix only accumulates the batch losses in the loop and interrogates the stopper once per epoch with the mean validation loss, saving the model when that mean improved.
from torch.utils.data import DataLoader
from tqdm import tqdm

from models import get_model
from utils.error_logger import ErrorLogger
from utils.utils import save_config


class EarlyStopper():
    def __init__(self, patience):
        self.index = 0
        self.patience = patience
        self.should_stop_early = False

    def update(self, model, epoch):
        current_loss = model.get_current_errors()['Seg_Loss']
        best_loss = model.best_validation_loss
        best_epoch = model.best_epoch

        if current_loss <= best_loss or epoch < 100:  # start early stopping after epoch 100
            self.index = 0
            print('current loss {} improved from {} at epoch {}'.format(current_loss, best_loss, best_epoch))
        else:
            self.index += 1
            print('current loss {} did not improve from {} at epoch {}'.format(current_loss, best_loss, best_epoch))

        if self.index >= self.patience:
            print('early stopping')
            self.should_stop_early = True

        return self.should_stop_early


def train(json_opts, json_filename, train_dataset, valid_dataset):
    train_opts = json_opts.training
    model = get_model(json_opts.model)
    train_loader = DataLoader(dataset=train_dataset, num_workers=16, batch_size=train_opts.batchSize, shuffle=True)
    valid_loader = DataLoader(dataset=valid_dataset, num_workers=16, batch_size=train_opts.batchSize, shuffle=False)
    error_logger = ErrorLogger()

    model.set_scheduler(train_opts)
    early_stopper = EarlyStopper(json_opts.training.early_stopping_patience)
    for epoch in range(model.which_epoch, train_opts.n_epochs):
        print('(epoch: %d, total # iters: %d)' % (epoch, len(train_loader)))

        # Training Iterations
        for epoch_iter, (images, labels, indices) in tqdm(enumerate(train_loader, 1), total=len(train_loader)):
            model.set_input(images, labels)
            model.optimize_parameters()
            errors = model.get_current_errors()
            error_logger.update(errors, split='train')

        # Validation Iterations
        for epoch_iter, (images, labels, indices) in tqdm(enumerate(valid_loader, 1), total=len(valid_loader)):
            model.set_input(images, labels)
            model.validate()

            errors = model.get_current_errors()
            stats = model.get_segmentation_stats()
            error_logger.update({**errors, **stats}, split='validation')

            # Update best validation loss/epoch values
            model.update_validation_state(epoch)  # expect: TB???

            early_stopper.update(model, epoch)  # expect: TB???

        error_logger.reset()

        # Save the model parameters
        if model.is_improving:
            save_config(json_opts, json_filename, model)
            model.save(json_opts.model.model_type, epoch)

        # Update the model learning rate
        model.update_learning_rate()

        if early_stopper.should_stop_early:
            break

    model_path = save_config(json_opts, json_filename, model)
    return model.best_validation_loss, model_path
