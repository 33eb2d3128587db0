# Reconstructed after HRNet/DEKR issue #13 ("set_epoch for DistributedSampler", confirmed by the author and fixed in commit e375276 "set epoch for data sampler", https://github.com/HRNet/DEKR/issues/13): for distributed training make_dataloader() (lib/dataset/build.py) wraps the COCO/CrowdPose keypoint dataset in a DistributedSampler with shuffle disabled on the DataLoader, but main_worker() in tools/train.py never called train_loader.sampler.set_epoch(epoch), so every epoch on every rank iterated the identical permutation. The fix calls train_loader.sampler.set_epoch(epoch) at the top of the epoch loop when args.distributed.
# Fixed version (the merged PR applied).
import logging
import os
import time

import torch
import torch.utils.data

from core.trainer import _get_loss_info
from utils.utils import AverageMeter, save_checkpoint


def make_dataloader(cfg, dataset, is_train=True, distributed=False):
    if is_train:
        images_per_gpu = cfg.TRAIN.IMAGES_PER_GPU
        shuffle = True
    else:
        images_per_gpu = cfg.TEST.IMAGES_PER_GPU
        shuffle = False
    images_per_batch = images_per_gpu * len(cfg.GPUS)

    if is_train and distributed:
        train_sampler = torch.utils.data.distributed.DistributedSampler(dataset)
        shuffle = False
    else:
        train_sampler = None

    return torch.utils.data.DataLoader(
        dataset,
        batch_size=images_per_batch,
        shuffle=shuffle,
        num_workers=cfg.WORKERS,
        pin_memory=cfg.PIN_MEMORY,
        sampler=train_sampler
    )


def do_train(cfg, model, data_loader, loss_factory, optimizer, epoch):
    logger = logging.getLogger("Training")
    batch_time = AverageMeter()
    heatmap_loss_meter = AverageMeter()
    offset_loss_meter = AverageMeter()

    model.train()
    end = time.time()
    for i, (image, heatmap, mask, offset, offset_w) in enumerate(data_loader):
        pheatmap, poffset = model(image)

        heatmap = heatmap.cuda(non_blocking=True)
        mask = mask.cuda(non_blocking=True)
        offset = offset.cuda(non_blocking=True)
        offset_w = offset_w.cuda(non_blocking=True)

        heatmap_loss, offset_loss = loss_factory(pheatmap, poffset, heatmap, mask, offset, offset_w)

        loss = 0
        if heatmap_loss is not None:
            heatmap_loss_meter.update(heatmap_loss.item(), image.size(0))
            loss = loss + heatmap_loss
        if offset_loss is not None:
            offset_loss_meter.update(offset_loss.item(), image.size(0))
            loss = loss + offset_loss

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        batch_time.update(time.time() - end)
        end = time.time()
        if i % cfg.PRINT_FREQ == 0 and cfg.RANK == 0:
            logger.info('Epoch: [{0}][{1}/{2}]\t{3}{4}'.format(
                epoch, i, len(data_loader),
                _get_loss_info(heatmap_loss_meter, 'heatmaps'),
                _get_loss_info(offset_loss_meter, 'offset')))


def main_worker(gpu, args, cfg, model, dataset, loss_factory, optimizer, final_output_dir):
    logger = logging.getLogger()
    if args.distributed:
        torch.cuda.set_device(gpu)
        model.cuda(gpu)
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[gpu])
    else:
        model = torch.nn.DataParallel(model).cuda()

    # Data loading code
    train_loader = make_dataloader(cfg, dataset, is_train=True, distributed=args.distributed)

    begin_epoch = cfg.TRAIN.BEGIN_EPOCH
    last_epoch = -1
    checkpoint_file = os.path.join(final_output_dir, 'checkpoint.pth.tar')
    if cfg.AUTO_RESUME and os.path.exists(checkpoint_file):
        checkpoint = torch.load(checkpoint_file, map_location=lambda storage, loc: storage)
        begin_epoch = checkpoint['epoch']
        last_epoch = checkpoint['epoch']
        model.load_state_dict(checkpoint['state_dict'])
        optimizer.load_state_dict(checkpoint['optimizer'])

    lr_scheduler = torch.optim.lr_scheduler.MultiStepLR(
        optimizer, cfg.TRAIN.LR_STEP, cfg.TRAIN.LR_FACTOR, last_epoch=last_epoch)

    for epoch in range(begin_epoch, cfg.TRAIN.END_EPOCH):  # not: TB???
        if args.distributed:
            train_loader.sampler.set_epoch(epoch)

        # train one epoch
        do_train(cfg, model, train_loader, loss_factory, optimizer, epoch)

        lr_scheduler.step()

        if not args.distributed or args.rank == 0:
            logger.info('=> saving checkpoint to {}'.format(final_output_dir))
            save_checkpoint({
                'epoch': epoch + 1,
                'model': cfg.MODEL.NAME,
                'state_dict': model.state_dict(),
                'best_state_dict': model.module.state_dict(),
                'optimizer': optimizer.state_dict(),
            }, False, final_output_dir)

    final_model_state_file = os.path.join(final_output_dir, 'final_state{}.pth.tar'.format(gpu))
    torch.save(model.module.state_dict(), final_model_state_file)
