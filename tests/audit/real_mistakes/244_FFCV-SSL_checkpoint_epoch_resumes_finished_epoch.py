# Reconstructed after facebookresearch/FFCV-SSL PR #3 ("fix checkpointing offset", merged, https://github.com/facebookresearch/FFCV-SSL/pull/3): in examples/train_ssl.py ImageNetTrainer.train() called self.checkpoint(epoch) after finishing an epoch, so the saved state held the weights/optimizer *after* that epoch but epoch=<that epoch>, and load_checkpoint() set start_epoch = ckpt["epoch"], making a restarted job train the already-finished epoch a second time (one silent extra epoch, with the LR schedule offset). The merged fix saves self.checkpoint(epoch + 1).
import torch as ch
import torch.nn as nn
from torch.cuda.amp import GradScaler, autocast
from tqdm import tqdm


class ImageNetTrainer:
    def __init__(self, gpu, model, probes, optimizer, optimizer_probes, ssl_loss,
                 train_loader, val_loader, log_folder, checkpoint_freq=5, rank=0):
        self.gpu = gpu
        self.rank = rank
        self.model = model
        self.probes = probes
        self.optimizer = optimizer
        self.optimizer_probes = optimizer_probes
        self.ssl_loss = ssl_loss
        self.loss = nn.CrossEntropyLoss()
        self.scaler = GradScaler()
        self.train_loader = train_loader
        self.val_loader = val_loader
        self.log_folder = log_folder
        self.checkpoint_freq = checkpoint_freq
        self.start_epoch = 0
        # Load models if checkpoints
        self.load_checkpoint()

    def train(self, epochs):
        for epoch in range(self.start_epoch, epochs):
            train_loss = self.train_loop(epoch)
            extra_dict = {'train_loss': train_loss, 'epoch': epoch}
            self.eval_and_log(extra_dict)
            # Run checkpointing
            self.checkpoint(epoch)  # expect: TB412
        if self.gpu == 0:
            ch.save(self.model.state_dict(), self.log_folder / 'final_weights.pt')

    def eval_and_log(self, extra_dict):
        stats = self.val_loop()
        print(dict(stats, **extra_dict))
        return stats

    def load_checkpoint(self):
        if (self.log_folder / "model.pth").is_file():
            if self.rank == 0:
                print("resuming from checkpoint")
            ckpt = ch.load(self.log_folder / "model.pth", map_location="cpu")
            self.start_epoch = ckpt["epoch"]  # also-ok: TB412
            self.model.load_state_dict(ckpt["model"])
            self.optimizer.load_state_dict(ckpt["optimizer"])
            self.probes.load_state_dict(ckpt["probes"])
            self.optimizer_probes.load_state_dict(ckpt["optimizer_probes"])

    def checkpoint(self, epoch):
        if self.rank != 0 or epoch % self.checkpoint_freq != 0:
            return
        state = dict(
            epoch=epoch,
            model=self.model.state_dict(),
            optimizer=self.optimizer.state_dict(),
            probes=self.probes.state_dict(),
            optimizer_probes=self.optimizer_probes.state_dict()
        )
        ch.save(state, self.log_folder / "model.pth")

    def train_loop(self, epoch):
        model = self.model
        model.train()
        losses = []
        iterator = tqdm(self.train_loader)
        for ix, (images_0, labels, images_1) in enumerate(iterator, start=epoch * len(self.train_loader)):
            batch_size = labels.size(0)
            images = ch.cat((images_0, images_1), dim=0)

            # SSL training
            self.optimizer.zero_grad(set_to_none=True)
            with autocast():
                embedding, _ = model(images)
                embedding = embedding.view(2, batch_size, -1)
                loss_train = self.ssl_loss(embedding[0], embedding[1])
            self.scaler.scale(loss_train).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()

            # Online linear probes training on frozen representations
            self.optimizer_probes.zero_grad(set_to_none=True)
            with ch.no_grad():
                with autocast():
                    _, list_representation = model(images_0)
            with autocast():
                list_outputs = self.probes(list_representation)
                loss_classif = sum(self.loss(out, labels) for out in list_outputs)
            self.scaler.scale(loss_classif).backward()
            self.scaler.step(self.optimizer_probes)
            self.scaler.update()

            losses.append(loss_train.detach())
            iterator.set_description(f'ep={epoch}, iter={ix}, loss={loss_train.item():.3f}')
        return ch.stack(losses).mean().item()

    def val_loop(self):
        model = self.model
        model.eval()
        correct, total = 0, 0
        with ch.no_grad():
            with autocast():
                for images, target in tqdm(self.val_loader):
                    _, list_representation = model(images)
                    list_outputs = self.probes(list_representation)
                    correct += (list_outputs[-1].argmax(1) == target).sum().item()
                    total += target.size(0)
        model.train()
        return {'top_1': correct / total}
