# Fixed version of ../144_torchtune_eleuther_eval_without_eval.py: silent on the codes that file expects.
import torch
import torch.nn as nn


class _EvalWrapper:
    def __init__(self, model: nn.Module, tokenizer, *, device, max_seq_length=4096, batch_size=8):
        self._model = model
        self._tokenizer = tokenizer
        self._device = device
        self._max_seq_length = max_seq_length
        self._batch_size = batch_size

    def tok_encode(self, text: str):
        return self._tokenizer.encode(text=text, add_bos=False, add_eos=False)

    @torch.no_grad()
    def _model_call(self, inps):
        return self._model(inps)  # not: TB201


class EleutherEvalRecipe:
    def __init__(self, cfg):
        self._cfg = cfg
        self._device = torch.device(cfg.device)
        self._dtype = getattr(torch, cfg.dtype)

    def _setup_model(self, model: nn.Module, model_state_dict) -> nn.Module:
        model.load_state_dict(model_state_dict)
        model.to(device=self._device, dtype=self._dtype)
        model.eval()
        return model

    def setup(self, model, checkpoint, tokenizer):
        self._model = self._setup_model(model, checkpoint["model"])
        self._tokenizer = tokenizer

    def evaluate(self, lm_eval_evaluate, task_dict):
        model_eval_wrapper = _EvalWrapper(
            self._model, self._tokenizer, device=self._device, max_seq_length=self._cfg.max_seq_length
        )
        output = lm_eval_evaluate(model_eval_wrapper, task_dict, limit=self._cfg.limit)
        for task, res in output["results"].items():
            print(f"{task}: {res}")
        return output
