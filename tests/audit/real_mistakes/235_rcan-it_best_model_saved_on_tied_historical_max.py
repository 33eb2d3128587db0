# Reconstructed after zudi-lin/rcan-it PR #8 ("Fixed a bug when saving the best model", merged, https://github.com/zudi-lin/rcan-it/pull/8): Trainer.test() (ptsr/utils/trainer.py) compared the running maximum of the PSNR log, best[0][idx_data, idx_scale], against self.best_val_score with >=; when the current iteration did not improve, the historical max equals the stored best, so is_best was True and the latest (worse) model overwrote model_best. The fix compares with a strict >.
import torch
from tqdm import tqdm
from torch.cuda.amp import autocast, GradScaler
from . import utility
from .solver import build_optimizer, build_lr_scheduler


class Trainer():
    def __init__(self, cfg, rank, loader, model, loss, device, ckp=None):
        self.cfg = cfg
        self.rank = rank
        self.scale = cfg.DATASET.DATA_SCALE
        self.ckp = ckp
        self.loader_test = loader.loader_test
        self.model = model
        self.loss = loss
        self.device = device
        self.iter_start = 0
        self.loader_train = iter(loader.loader_train)
        self.optimizer = build_optimizer(cfg, self.model)
        self.lr_scheduler = build_lr_scheduler(cfg, self.optimizer)
        self.iteration_total = self.cfg.SOLVER.ITERATION_TOTAL
        self.best_val_score = 0
        self.mixed_fp = self.cfg.MODEL.MIXED_PRECESION
        self.scaler = GradScaler(backoff_factor=0.91, growth_factor=1.1,
                                 growth_interval=5000) if self.mixed_fp else None

    def train(self):
        self.model.train()
        for i in range(self.iter_start, self.iteration_total):
            lr, hr, _ = next(self.loader_train)
            lr = lr.to(self.device, non_blocking=True)
            hr = hr.to(self.device, non_blocking=True)
            with autocast(enabled=self.mixed_fp):
                sr = self.model(lr)
                loss = self.loss(sr, hr)

            self.optimizer.zero_grad(set_to_none=not self.mixed_fp)
            if self.mixed_fp:
                self.scaler.scale(loss).backward()
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                loss.backward()
                self.optimizer.step()
            self.lr_scheduler.step()

            del lr, hr, sr, loss
            if self.rank is None or self.rank == 0:
                if (i + 1) % self.cfg.SOLVER.TEST_EVERY == 0:
                    self.test(i + 1)
                    self.model.train()
                if (i + 1) % self.cfg.SOLVER.ITERATION_SAVE == 0:
                    self.ckp.save(self, i + 1, False, self.iter_start, iter_suffix=True)

    def test(self, iteration: int = -1):
        self.model.eval()
        torch.set_grad_enabled(False)
        self.ckp.write_log('\nEvaluation:')
        self.ckp.add_log(torch.zeros(1, len(self.loader_test), len(self.scale)))
        for idx_data, d in enumerate(self.loader_test):
            for idx_scale, scale in enumerate(self.scale):
                d.dataset.set_scale(idx_scale)
                for lr, hr, filename in tqdm(d, ncols=80):
                    lr = lr.to(self.device, non_blocking=True)
                    with autocast(enabled=self.mixed_fp):
                        sr = self.model(lr)
                    sr = utility.quantize(sr, self.cfg.DATASET.RGB_RANGE)
                    self.ckp.log[-1, idx_data, idx_scale] += utility.calc_psnr_torch(
                        sr, hr.to(sr.device), scale, float(self.cfg.DATASET.RGB_RANGE))

                self.ckp.log[-1, idx_data, idx_scale] /= len(d)
                best = self.ckp.log.max(0)
                self.ckp.write_log('[{} x{}]\tPSNR: {:.3f} @iter {} (Best: {:.3f})'.format(
                    d.dataset.name, scale, self.ckp.log[-1, idx_data, idx_scale],
                    iteration, best[0][idx_data, idx_scale]))

        if iteration >= 0:
            is_best = False
            if best[0][idx_data, idx_scale] >= self.best_val_score:  # expect: TB???
                self.best_val_score = best[0][idx_data, idx_scale]
                is_best = True
            self.ckp.save(self, iteration, is_best, self.iter_start)
        torch.set_grad_enabled(True)
