# Reconstructed after asyml/texar-pytorch issue #310 ("Switch between model.train() and model.eval()"): the
# BERT classifier example called model.train() once before the epochs and model.eval() in _eval_epoch(), so from
# the second epoch on the model trained in eval mode.
import torch


def main(model, optim, scheduler, train_data, eval_data, num_epochs):
    def _train_epoch():
        for batch in train_data:
            optim.zero_grad()
            loss = model(batch["input_ids"], labels=batch["label_ids"]).loss
            loss.backward()
            optim.step()
            scheduler.step()

    @torch.no_grad()
    def _eval_epoch():
        model.eval()  # expect: TB202
        return sum(model(b["input_ids"], labels=b["label_ids"]).loss.item() for b in eval_data)

    model.train()
    for _ in range(num_epochs):
        _train_epoch()
        print(_eval_epoch())  # also-ok: TB202
