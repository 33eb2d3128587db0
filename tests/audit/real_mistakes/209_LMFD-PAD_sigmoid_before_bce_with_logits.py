# Reconstructed after meilfang/LMFD-PAD PR #1 ("removed unnecessary sigmoid in classification.", merged, https://github.com/meilfang/LMFD-PAD/pull/1): FAD_HAM_Net.forward ended its binary classification branch with torch.sigmoid(x), but the training loss WeightedFocalLoss is built on F.binary_cross_entropy_with_logits, which applies the sigmoid itself, so the focal/BCE loss was computed on sigmoid(sigmoid(logit)) (outputs squashed into [0.5, 0.73]) and gave vanishing gradients. The maintainer thanked the contributor and merged the removal of the sigmoid from forward(); the follow-up PR #2 (same author, merged) applies torch.sigmoid to the prediction in the val/test steps instead.
import torch
from torch import nn
import torch.nn.functional as F
from torch.cuda.amp import autocast, GradScaler
from tqdm import tqdm

from model.mfad import FAD_Head, ResNetEncoder
from model.attention import ChannelGate, SpatialGate
from utils import AvgrageMeter, evalute_performances


class WeightedFocalLoss(nn.Module):
    "Non weighted version of Focal Loss"
    def __init__(self, alpha=.25, gamma=2):
        super(WeightedFocalLoss, self).__init__()
        self.alpha = torch.tensor([alpha, 1-alpha]).cuda()
        self.gamma = gamma

    def forward(self, inputs, targets):
        BCE_loss = F.binary_cross_entropy_with_logits(inputs, targets, reduction='none')
        targets = targets.type(torch.long)
        at = self.alpha.gather(0, targets.data.view(-1))
        pt = torch.exp(-BCE_loss)
        F_loss = at*(1-pt)**self.gamma * BCE_loss
        return F_loss.mean()


class FAD_HAM_Net(nn.Module):
    def __init__(self, image_shape=(3, 224, 224), variant='resnet50'):
        super(FAD_HAM_Net, self).__init__()
        self.FAD_Head = FAD_Head(image_shape[-1])
        self.FAD_encoder = ResNetEncoder(in_channels=12, variant=variant)
        self.RGB_encoder = ResNetEncoder(in_channels=3, variant=variant)
        self.lastconv1 = nn.Sequential(
            nn.Conv2d(4096, 1, kernel_size=3, stride=1, padding=1, bias=False),
            nn.Sigmoid(),
        )
        self.linear1 = nn.Linear(2048*2, 1024, bias=False)
        self.bn = nn.BatchNorm1d(1024)
        self.drop = nn.Dropout(p=0.6)
        self.cls = nn.Linear(1024, 1, bias=False)

    def forward(self, x):
        fad, fad_3, _, _ = self.FAD_encoder(self.FAD_Head(x))
        rgb, rgb_3, _, _ = self.RGB_encoder(x)
        map_x = self.lastconv1(torch.cat((fad_3, rgb_3), dim=1)).squeeze(1)

        x = torch.cat((fad, rgb), dim=1)
        x = self.linear1(x)
        x = self.bn(x)
        x = self.drop(x)
        x = self.cls(x)
        x = torch.sigmoid(x)  # expect: TB???
        return x, map_x


def train(args, train_loader, val_loader):
    model = FAD_HAM_Net(variant=args.backbone).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=0.0001)
    smoothl1_criterion = torch.nn.SmoothL1Loss().cuda()
    FL_criterion = WeightedFocalLoss(alpha=.5, gamma=2).cuda()
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.999)
    scaler = GradScaler()

    for epoch in range(1, args.epochs+1):
        loss_total = AvgrageMeter()
        model.train()
        w1 = 100 if epoch >= 5 else 1

        for i, (images, labels, map_x) in enumerate(tqdm(train_loader)):
            images = images.cuda()
            labels = labels.cuda()
            map_x = map_x.cuda()
            model.zero_grad()

            with autocast():
                pred, map_y = model(images)
                pred = torch.squeeze(pred)
                loss_1 = FL_criterion(pred.type(torch.cuda.FloatTensor), labels.type(torch.cuda.FloatTensor))
                loss_2 = smoothl1_criterion(map_y, map_x) * w1
                loss = loss_1 + loss_2

            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            loss_total.update(loss.data, images.shape[0])

        model.eval()
        predictions, gt_labels = [], []
        with torch.no_grad():
            for (images, labels, _, video_id) in tqdm(val_loader):
                images = images.cuda()
                labels = labels.cuda()
                pred, _ = model(images)

                for j in range(images.shape[0]):
                    predictions.append(pred[j].detach().cpu())
                    gt_labels.append(labels[j].detach().cpu())

        val_th, val_apcer, val_bpcer, val_acer, val_auc = evalute_performances(predictions, gt_labels)
        scheduler.step()
        tqdm.write('Epoch: %d, Train: loss_total= %.4f, Val: th=%.4f, acer=%.4f \n' % (epoch, loss_total.avg, val_th, val_acer))
    return model
