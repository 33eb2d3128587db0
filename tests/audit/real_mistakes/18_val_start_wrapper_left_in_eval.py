# Reconstructed after fartashf/vsepp issue #4 ("Finish validation without running model.train()"): validation
# runs every val_step iterations and switches the encoders to eval mode through model.val_start(), but
# model.train_start() is only called at the start of the next epoch, so dropout/BatchNorm stay off for the rest
# of the epoch.
import torch


class VSE:
    def __init__(self, img_enc, txt_enc, params, criterion):
        self.img_enc, self.txt_enc = img_enc, txt_enc
        self.optimizer = torch.optim.Adam(params, lr=2e-4)
        self.criterion = criterion
        self.Eiters = 0

    def train_start(self):
        self.img_enc.train()
        self.txt_enc.train()

    def val_start(self):
        self.img_enc.eval()
        self.txt_enc.eval()

    def train_emb(self, images, captions):
        self.Eiters += 1
        img_emb, cap_emb = self.img_enc(images), self.txt_enc(captions)
        self.optimizer.zero_grad()
        loss = self.criterion(img_emb, cap_emb)
        loss.backward()
        self.optimizer.step()


def validate(val_loader, model):
    model.val_start()  # expect: TB202
    with torch.no_grad():
        return [(model.img_enc(images), model.txt_enc(captions)) for images, captions in val_loader]


def train(train_loader, val_loader, model, val_step):
    model.train_start()
    for images, captions in train_loader:
        model.train_emb(images, captions)
        if model.Eiters % val_step == 0:
            validate(val_loader, model)  # also-ok: TB202
