# Reconstructed after royerlab/cytoself issue #29 ("Early stopping does not count consecutive steps on pytorch branch", closed-as-fixed, https://github.com/royerlab/cytoself/issues/29) / PR #31 ("Reset early stop counting", merged, https://github.com/royerlab/cytoself/pull/31): in BaseTrainer.fit() (cytoself/trainer/basetrainer.py) count_early_stop was incremented on every epoch without a val_loss improvement but never reset when a new best val_loss was found, so it counted the total number of non-improving epochs since the start instead of consecutive ones and training stopped early long before earlystop_patience consecutive bad epochs (the paper describes 12 consecutive epochs). The merged fix sets count_early_stop = 0 in the improvement branch.
from copy import deepcopy
from os.path import join
from typing import Optional

import numpy as np
import pandas as pd
import torch


class BaseTrainer:
    def _reduce_lr_on_plateau(self, count_lr_no_improve: int) -> int:
        if self.optimizer is None:
            raise ValueError('optimizer is not defined.')
        else:
            if count_lr_no_improve >= self.train_args['reducelr_patience']:
                if self.optimizer.param_groups[0]['lr'] > self.train_args['min_lr']:
                    self.optimizer.param_groups[0]['lr'] *= self.train_args['reducelr_increment']
                    print('learn rate = ', self.optimizer.param_groups[0]['lr'])
                    return 0
                else:
                    return count_lr_no_improve
            else:
                return count_lr_no_improve

    def fit(
        self,
        datamanager,
        initial_epoch: int = 1,
        tensorboard_path: Optional[str] = None,
        **kwargs,
    ):
        stop = False
        if self.model is None:
            raise ValueError('model is not defined.')
        else:
            self.current_epoch = initial_epoch
            best_vloss = torch.inf if 'val_loss' not in self.history else min(self.history['val_loss'])
            count_lr_no_improve = 0
            count_early_stop = 0
            for current_epoch in range(self.current_epoch, self.train_args['max_epoch'] + 1):
                if stop:
                    break
                else:
                    self.current_epoch = current_epoch
                    print(f'Epoch {current_epoch}/{self.train_args["max_epoch"]}')
                    self.model.train(True)
                    train_metrics = self.run_one_epoch(datamanager, 'train', **kwargs)
                    self.model.train(False)

                    with torch.inference_mode():
                        val_metrics = self.run_one_epoch(datamanager, 'val', **kwargs)

                    lr_metrics = pd.DataFrame({'lr': [self.optimizer.param_groups[0]['lr']]})
                    metrics_all = [train_metrics, val_metrics, lr_metrics]

                    _vloss = np.nan_to_num(val_metrics['val_loss'].iloc[-1])
                    if _vloss < best_vloss:
                        best_vloss = _vloss
                        self.best_model = deepcopy(self.model)
                        self.save_checkpoint()
                    else:
                        count_lr_no_improve += 1
                        count_early_stop += 1  # expect: TB???

                    count_lr_no_improve = self._reduce_lr_on_plateau(count_lr_no_improve)

                    if count_early_stop >= self.train_args['earlystop_patience']:
                        print('Early stopping.')
                        stop = True

                    if stop or current_epoch == self.train_args["max_epoch"]:
                        with torch.inference_mode():
                            test_metrics = self.run_one_epoch(datamanager, 'test', **kwargs)
                        metrics_all.append(test_metrics)

                    self.record_metrics(metrics_all)

                    if tensorboard_path is not None:
                        tensorboard_path = join(self.savepath_dict['homepath'], tensorboard_path)
                    self.write_on_tensorboard(tensorboard_path)

            self.save_model(self.savepath_dict['homepath'], f'model_{self.current_epoch}.pt')
            self.history.to_csv(join(self.savepath_dict['visualization'], 'training_history.csv'), index=False)

    def save_checkpoint(self, path: Optional[str] = None):
        if path is None:
            path = self.savepath_dict['checkpoints']
        fpath = join(path, f'checkpoint_ep{self.current_epoch}.chkp')
        torch.save(
            {
                'epoch': self.current_epoch,
                'model_state_dict': self.model.state_dict(),
                'optimizer_state_dict': self.optimizer.state_dict(),
                'history': self.history,
            },
            fpath,
        )
        print('A model checkpoint has been saved at ' + fpath)
