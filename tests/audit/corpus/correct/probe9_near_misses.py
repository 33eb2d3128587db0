import torch
import torch.backends.cudnn as cudnn_flags

cudnn_flags.benchmark = True


def launch(opts):
    torch.use_deterministic_algorithms(True)
    cudnn_flags.benchmark = False
    Segmenter(opts).fit(opts.train, opts.val)


class Segmenter:
    def __init__(self, opts):
        self.backbone = build(opts)
        self.optim = torch.optim.AdamW(self.backbone.parameters(), lr=opts.lr)
        self.grad_steps = opts.grad_steps
        self.ramp = opts.ramp
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.optim, lr_lambda=self._ramp)

    def _ramp(self, i):
        if i < self.ramp:
            return (i + 1) / self.ramp
        return 1.0

    def fit_batch(self, imgs, masks, seen):
        (self.backbone.loss(imgs, masks) / self.grad_steps).backward()
        if seen % self.grad_steps == 0:
            self.optim.step()
            self.optim.zero_grad()

    @torch.no_grad()
    def dice(self, imgs, masks):
        self.backbone.eval()
        pred = self.backbone(imgs)
        self.backbone.train()
        return (pred.argmax(1) == masks).float().mean().item()

    def fit(self, train, val):
        self.backbone.train()
        for seen, (imgs, masks) in enumerate(train, 1):
            self.fit_batch(imgs, masks, seen)
        return sum(self.dice(i, m) for i, m in val)


def detector_epoch(det, batches, opt, grad_scaler, n_acc):
    for k, (ims, tgts) in enumerate(batches):
        with torch.autocast("cuda"):
            terms = det(ims, tgts)
            objective = sum(t for t in terms.values()) / n_acc
        grad_scaler.scale(objective).backward()
        if (k + 1) % n_acc == 0:
            grad_scaler.step(opt)
            grad_scaler.update()
            opt.zero_grad()


def rl_loop(critic, optim, memory, holdout, every=1000):
    tally = {"td": 0.0}
    for step in range(50000):
        res = critic(memory.draw(64))
        td = res["td_loss"]
        optim.zero_grad()
        td.backward()
        optim.step()
        tally["td"] = tally["td"] + td.item()
        if step % every == 0:
            critic.eval()
            with torch.inference_mode():
                for obs in holdout:
                    print(critic(obs).amax().item())
            critic.train()
