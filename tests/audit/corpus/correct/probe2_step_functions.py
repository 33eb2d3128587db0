"""Step functions without a loop, scheduler after the optimizer (or stepped for the previous step) (correct)."""


def train_step(model, batch, optimizer, scheduler, loss_fn):
    optimizer.zero_grad()
    loss_fn(model(batch[0]), batch[1]).backward()
    optimizer.step()
    scheduler.step()


def training_step(self, batch, batch_idx):
    opt = self.optimizers()
    sch = self.lr_schedulers()
    if batch_idx > 0:
        sch.step()
    opt.zero_grad()
    self.manual_backward(self.loss(batch))
    opt.step()


def gan_step(opt_g, opt_d, sched_g, sched_d, loss_d, loss_g):
    opt_d.zero_grad()
    loss_d.backward()
    opt_d.step()
    sched_d.step()
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
    sched_g.step()
