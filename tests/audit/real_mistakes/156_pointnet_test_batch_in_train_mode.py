# Reconstructed after fxia22/pointnet.pytorch PR #19 ("sets model to eval mode (required due to batchnorm layer)",
# https://github.com/fxia22/pointnet.pytorch/pull/19): train_classification.py evaluated a test batch every 10
# iterations by calling the classifier while it was still in training mode, so the BatchNorm layers normalised
# with (and updated their running statistics from) the test batch instead of using the learned statistics, and the
# reported test accuracy was wrong.  The PR switches to classifier.eval() for the test batch (and back to
# classifier.train() for training); the maintainer merged it ("thanks!").  The test pass is shown under
# torch.no_grad() here (the 2018 code used Variables).
import torch
import torch.nn.functional as F
import torch.optim as optim


def train(classifier, dataloader, testdataloader, nepoch: int, batchsize: int, outf: str):
    optimizer = optim.Adam(classifier.parameters(), lr=0.001, betas=(0.9, 0.999))
    classifier.cuda()
    num_batch = len(dataloader)

    for epoch in range(nepoch):
        for i, data in enumerate(dataloader, 0):
            points, target = data
            target = target[:, 0]
            points = points.transpose(2, 1)
            points, target = points.cuda(), target.cuda()
            optimizer.zero_grad()
            pred, _ = classifier(points)
            loss = F.nll_loss(pred, target)
            loss.backward()
            optimizer.step()
            pred_choice = pred.data.max(1)[1]
            correct = pred_choice.eq(target.data).cpu().sum()
            print("[%d: %d/%d] train loss: %f accuracy: %f" % (
                epoch, i, num_batch, loss.item(), correct.item() / float(batchsize)))

            if i % 10 == 0:
                j, data = next(enumerate(testdataloader, 0))
                points, target = data
                target = target[:, 0]
                points = points.transpose(2, 1)
                points, target = points.cuda(), target.cuda()
                with torch.no_grad():
                    pred, _ = classifier(points)  # expect: TB201
                    loss = F.nll_loss(pred, target)
                pred_choice = pred.data.max(1)[1]
                correct = pred_choice.eq(target.data).cpu().sum()
                print("[%d: %d/%d] test loss: %f accuracy: %f" % (
                    epoch, i, num_batch, loss.item(), correct.item() / float(batchsize)))

        torch.save(classifier.state_dict(), "%s/cls_model_%d.pth" % (outf, epoch))
