# Reconstructed after OpenNMT/OpenNMT-py PR #616 ("Gideon fix optimizer loading erases parameters", merged by srush as ebc8b544, https://github.com/OpenNMT/OpenNMT-py/pull/616; issue #617): build_optim in train.py loaded the checkpointed optimizer state (optim.optimizer.load_state_dict(...)) and then unconditionally called optim.set_parameters(model.named_parameters()), which constructs a brand-new torch optimizer, so the restored Adam moments were silently discarded on every resume. The merged fix keeps a copy of the saved optimizer state_dict, re-creates the optimizer with set_parameters first, and only then loads the saved state into it (moving state tensors to GPU).
# Fixed version (the merged PR applied).
import torch
import onmt


def build_optim(model, checkpoint, opt):
    saved_optimizer_state_dict = None

    if opt.train_from:
        print('Loading optimizer from checkpoint.')
        optim = checkpoint['optim']
        # Keep a copy: set_parameters() below re-creates optim.optimizer.
        saved_optimizer_state_dict = optim.optimizer.state_dict()
    else:
        print('Making optimizer for training.')
        optim = onmt.Optim(
            opt.optim, opt.learning_rate, opt.max_grad_norm,
            lr_decay=opt.learning_rate_decay,
            start_decay_at=opt.start_decay_at,
            beta1=opt.adam_beta1,
            beta2=opt.adam_beta2,
            decay_method=opt.decay_method,
            warmup_steps=opt.warmup_steps,
            model_size=opt.rnn_size)

    # Stage 1: (re-)create the optimizer over the model parameters.
    optim.set_parameters(model.named_parameters())

    if opt.train_from:
        # Stage 2: load the saved state into the re-created optimizer.
        optim.optimizer.load_state_dict(saved_optimizer_state_dict)  # not: TB???
        if opt.gpuid:
            for state in optim.optimizer.state.values():
                for k, v in state.items():
                    if torch.is_tensor(v):
                        state[k] = v.cuda()

    return optim


class Optim(object):
    def set_parameters(self, params):
        self.params = [p for k, p in params if p.requires_grad]
        if self.method == 'sgd':
            self.optimizer = torch.optim.SGD(self.params, lr=self.lr)
        elif self.method == 'adam':
            self.optimizer = torch.optim.Adam(self.params, lr=self.lr, betas=self.betas, eps=1e-9)
        else:
            raise RuntimeError("Invalid optim method: " + self.method)

    def step(self):
        if self.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)
        self.optimizer.step()


def main(opt, checkpoint, model, train_iter, loss_fn):
    optim = build_optim(model, checkpoint, opt)
    for epoch in range(opt.start_epoch, opt.epochs + 1):
        model.train()
        for batch in train_iter:
            model.zero_grad()
            loss = loss_fn(model(batch.src, batch.tgt), batch.tgt)
            loss.backward()
            optim.step()
