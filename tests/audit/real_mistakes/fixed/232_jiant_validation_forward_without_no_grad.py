# Reconstructed after nyu-mll/jiant PR #718 ("torch.no_grad() when evaluating.", merged, https://github.com/nyu-mll/jiant/pull/718): in SamplingMultiTaskTrainer._calculate_validation_performance() (src/trainer.py) the validation forward pass out = self._forward(batch, task=task) ran with autograd enabled (the model was only switched to eval()), so every validation batch built and kept a full autograd graph that was never used, costing time and GPU memory during each validation pass. The maintainers merged the fix that wraps the validation forward in `with torch.no_grad():`.
# Fixed version (the merged PR applied).
import math
import time
import logging as log

import torch
from allennlp.data.iterators import BasicIterator
from allennlp.nn.util import move_to_device


class SamplingMultiTaskTrainer:
    def _calculate_validation_performance(
        self, task, task_infos, tasks, batch_size, all_val_metrics, n_examples_overall
    ):
        n_examples, batch_num = 0, 0
        task_info = task_infos[task.name]
        if self._val_data_limit >= 0:
            max_data_points = min(task.n_val_examples, self._val_data_limit)
        else:
            max_data_points = task.n_val_examples
        val_generator = BasicIterator(batch_size, instances_per_epoch=max_data_points)(
            task.val_data, num_epochs=1, shuffle=False
        )
        val_generator = move_to_device(val_generator, self._cuda_device)
        n_val_batches = math.ceil(max_data_points / batch_size)
        all_val_metrics["%s_loss" % task.name] = 0.0

        for batch in val_generator:
            batch_num += 1
            with torch.no_grad():  # not: TB???
                out = self._forward(batch, task=task)
            loss = out["loss"]
            all_val_metrics["%s_loss" % task.name] += loss.data.cpu().numpy()
            n_examples += out["n_exs"]

            if time.time() - task_info["last_log"] > self._log_interval:
                task_metrics = task.get_metrics()
                task_metrics["%s_loss" % task.name] = (
                    all_val_metrics["%s_loss" % task.name] / batch_num
                )
                description = self._description_from_metrics(task_metrics)
                log.info(
                    "Evaluate: task %s, batch %d (%d): %s",
                    task.name,
                    batch_num,
                    n_val_batches,
                    description,
                )
                task_info["last_log"] = time.time()
        assert batch_num == n_val_batches

        task_metrics = task.get_metrics(reset=True)
        for name, value in task_metrics.items():
            all_val_metrics["%s_%s" % (task.name, name)] = value
        all_val_metrics["%s_loss" % task.name] /= batch_num
        if task.val_metric_decreases and len(tasks) > 1:
            all_val_metrics["micro_avg"] += (
                1 - all_val_metrics[task.val_metric] / self._dec_val_scale
            ) * n_examples
            all_val_metrics["macro_avg"] += (
                1 - all_val_metrics[task.val_metric] / self._dec_val_scale
            )
        else:
            all_val_metrics["micro_avg"] += all_val_metrics[task.val_metric] * n_examples
            all_val_metrics["macro_avg"] += all_val_metrics[task.val_metric]
        n_examples_overall += n_examples

        task_info["n_batches_since_val"] = 0
        task_info["loss"] = 0
        all_val_metrics["micro_avg"] /= n_examples_overall
        all_val_metrics["macro_avg"] /= len(tasks)
        return n_examples_overall, task_infos, all_val_metrics

    def _validate(self, epoch, tasks, batch_size, periodic_save=True):
        task_infos = self._task_infos
        self._model.eval()
        all_val_metrics = {("%s_loss" % task.name): 0.0 for task in tasks}
        all_val_metrics["macro_avg"] = 0.0
        all_val_metrics["micro_avg"] = 0.0
        n_examples_overall = 0.0

        for task in tasks:
            n_examples_overall, task_infos, all_val_metrics = self._calculate_validation_performance(
                task, task_infos, tasks, batch_size, all_val_metrics, n_examples_overall
            )
        return all_val_metrics

    def _forward(self, batch, task=None):
        tensor_batch = move_to_device(batch, self._cuda_device)
        model_out = self._model.forward(task, tensor_batch)
        return model_out
