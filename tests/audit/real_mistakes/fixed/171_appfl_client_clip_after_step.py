# Fixed version of ../171_appfl_client_clip_after_step.py: silent on the codes that file expects.
import copy

import torch


class ClientOptim:
    def __init__(self, id, weight, model, loss_fn, dataloader, cfg, outfile, **kwargs):
        self.id = id
        self.weight = weight
        self.model = model
        self.loss_fn = loss_fn
        self.dataloader = dataloader
        self.cfg = cfg
        self.outfile = outfile
        self.optim = kwargs["optim"]
        self.optim_args = kwargs["optim_args"]
        self.num_local_epochs = kwargs["num_local_epochs"]
        self.clip_value = kwargs.get("clip_value", False)
        self.clip_norm = kwargs.get("clip_norm", 2)
        self.primal_state = None

    def update(self):
        self.model.to(self.cfg.device)
        optimizer = getattr(torch.optim, self.optim)(self.model.parameters(), **self.optim_args)
        self.model.train()
        for t in range(self.num_local_epochs):
            train_loss = 0.0
            for data, target in self.dataloader:
                data = data.to(self.cfg.device)
                target = target.to(self.cfg.device)
                optimizer.zero_grad()
                output = self.model(data)
                loss = self.loss_fn(output, target)
                loss.backward()
                if self.clip_value is not False:
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_value,  # not: TB113
                                                   norm_type=self.clip_norm)
                optimizer.step()
                train_loss += loss.item()
            self.outfile.write(f"client {self.id} local epoch {t}: loss {train_loss / len(self.dataloader):.4f}\n")
        self.primal_state = copy.deepcopy(self.model.state_dict())
        return {"primal": self.primal_state}
