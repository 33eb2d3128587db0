# Reconstructed after sacmehta/ESPNetv2 issue #8 ("Is there a problem here ?", closed-as-fixed, https://github.com/sacmehta/ESPNetv2/issues/8): in trainValidateSegmentation() (segmentation/main.py) is_best was computed as mIOU_val > best_val but best_val was never updated, so it stayed 0, every epoch counted as best and model_best.pth held the last epoch. The fix (commit c4c2f42) adds best_val = max(mIOU_val, best_val) after the comparison.
import os
import pickle
import torch
import torch.backends.cudnn as cudnn
import loadData as ld
import Transforms as myTransforms
import DataSet as myDataLoader
from cnn import SegmentationModel as net
from train_utils import train, val, netParams, save_checkpoint, poly_lr_scheduler


def trainValidateSegmentation(args):
    num_gpus = torch.cuda.device_count()
    model = net.EESPNet_Seg(args.classes, s=args.s, pretrained=args.pretrained, gpus=num_gpus)
    if num_gpus >= 1:
        model = torch.nn.DataParallel(model)
    args.savedir = args.savedir + str(args.s) + '/'
    if not os.path.exists(args.savedir):
        os.mkdir(args.savedir)

    if not os.path.isfile(args.cached_data_file):
        data = ld.LoadData(args.data_dir, args.classes, args.cached_data_file).processData()
    else:
        data = pickle.load(open(args.cached_data_file, "rb"))

    if torch.cuda.is_available():
        args.onGPU = True
        model = model.cuda()
    print('Total network parameters: ' + str(netParams(model)))

    weight = torch.from_numpy(data['classWeights'])
    if args.onGPU:
        weight = weight.cuda()
    criteria = torch.nn.CrossEntropyLoss(weight)

    trainTransform = myTransforms.Compose([
        myTransforms.Normalize(mean=data['mean'], std=data['std']),
        myTransforms.RandomCropResize(size=(args.inWidth, args.inHeight)),
        myTransforms.RandomFlip(),
        myTransforms.ToTensor(args.scaleIn),
    ])
    valTransform = myTransforms.Compose([
        myTransforms.Normalize(mean=data['mean'], std=data['std']),
        myTransforms.Scale(1024, 512),
        myTransforms.ToTensor(args.scaleIn),
    ])
    trainLoader = torch.utils.data.DataLoader(
        myDataLoader.MyDataset(data['trainIm'], data['trainAnnot'], transform=trainTransform),
        batch_size=args.batch_size, shuffle=True, num_workers=args.num_workers, pin_memory=True)
    valLoader = torch.utils.data.DataLoader(
        myDataLoader.MyDataset(data['valIm'], data['valAnnot'], transform=valTransform),
        batch_size=args.batch_size, shuffle=False, num_workers=args.num_workers, pin_memory=True)

    if args.onGPU:
        cudnn.benchmark = True

    start_epoch = 0
    best_val = 0
    lr = args.lr
    optimizer = torch.optim.Adam(model.parameters(), lr, (0.9, 0.999), eps=1e-08, weight_decay=5e-4)

    if args.resume and os.path.isfile(args.resume):
        checkpoint = torch.load(args.resume)
        start_epoch = checkpoint['epoch']
        best_val = checkpoint['best_val']
        model.load_state_dict(checkpoint['state_dict'])
        optimizer.load_state_dict(checkpoint['optimizer'])

    for epoch in range(start_epoch, args.max_epochs):
        poly_lr_scheduler(args, optimizer, epoch)
        lr = optimizer.param_groups[0]['lr']
        print("Learning rate: " + str(lr))

        lossTr, overall_acc_tr, per_class_acc_tr, per_class_iu_tr, mIOU_tr = train(
            args, trainLoader, model, criteria, optimizer, epoch)
        lossVal, overall_acc_val, per_class_acc_val, per_class_iu_val, mIOU_val = val(
            args, valLoader, model, criteria)

        is_best = mIOU_val > best_val  # expect: TB???
        save_checkpoint({
            'epoch': epoch + 1,
            'state_dict': model.state_dict(),
            'optimizer': optimizer.state_dict(),
            'lr': lr,
            'best_val': best_val,
        }, args.savedir + 'checkpoint.pth.tar')

        if is_best:
            model_file_name = args.savedir + os.sep + 'model_best.pth'
            torch.save(model.state_dict(), model_file_name)

        print("\nEpoch No.: %d\tTrain Loss = %.4f\tVal Loss = %.4f\t mIOU(tr) = %.4f\t mIOU(val) = %.4f"
              % (epoch, lossTr, lossVal, mIOU_tr, mIOU_val))
