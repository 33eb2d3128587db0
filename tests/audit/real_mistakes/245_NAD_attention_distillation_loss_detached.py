# Reconstructed after bboylyg/NAD issue #8 ("How does the attention loss work", confirmed and fixed by the author in commit 6907ea2, https://github.com/bboylyg/NAD/issues/8): in main.py train_step() (Neural Attention Distillation) each attention-transfer term was computed as criterionAT(activation_s, activation_t).detach() * beta, i.e. the whole student-side loss was detached before being added to the classification loss, so at_loss.backward() produced no gradient from the distillation terms and the student was only fine-tuned with cross-entropy. The fix detaches only the teacher activations: criterionAT(activation_s, activation_t.detach()) * beta.
import torch
from torch import nn
import torch.nn.functional as F

from models.selector import select_model
from utils.util import AverageMeter, accuracy, adjust_learning_rate, save_checkpoint
from data_loader import get_train_loader, get_test_loader
from config import get_arguments


class AT(nn.Module):
    """Attention transfer loss (sum of absolute values with power p)."""

    def __init__(self, p):
        super(AT, self).__init__()
        self.p = p

    def forward(self, fm_s, fm_t):
        return F.mse_loss(self.attention_map(fm_s), self.attention_map(fm_t))

    def attention_map(self, fm, eps=1e-6):
        am = torch.pow(torch.abs(fm), self.p)
        am = torch.sum(am, dim=1, keepdim=True)
        norm = torch.norm(am, dim=(2, 3), keepdim=True)
        return torch.div(am, norm + eps)


def at_term(criterionAT, activation_s, activation_t, beta):
    return criterionAT(activation_s, activation_t).detach() * beta  # expect: TB???


def train_step(opt, train_loader, nets, optimizer, criterions, epoch):
    at_losses = AverageMeter()
    top1 = AverageMeter()

    snet = nets['snet']
    tnet = nets['tnet']
    criterionCls = criterions['criterionCls']
    criterionAT = criterions['criterionAT']

    snet.train()

    for idx, (img, target) in enumerate(train_loader, start=1):
        if opt.cuda:
            img = img.cuda()
            target = target.cuda()

        activation1_s, activation2_s, activation3_s, output_s = snet(img)
        activation1_t, activation2_t, activation3_t, _ = tnet(img)

        cls_loss = criterionCls(output_s, target)
        at3_loss = at_term(criterionAT, activation3_s, activation3_t, opt.beta3)
        at2_loss = at_term(criterionAT, activation2_s, activation2_t, opt.beta2)
        at1_loss = at_term(criterionAT, activation1_s, activation1_t, opt.beta1)
        at_loss = at1_loss + at2_loss + at3_loss + cls_loss

        prec1, _ = accuracy(output_s, target, topk=(1, 5))
        at_losses.update(at_loss.item(), img.size(0))
        top1.update(prec1.item(), img.size(0))

        optimizer.zero_grad()
        at_loss.backward()
        optimizer.step()

        if idx % opt.print_freq == 0:
            print('Epoch[{0}]:[{1:03}/{2:03}] AT_loss:{losses.val:.4f}({losses.avg:.4f}) '
                  'prec@1:{top1.val:.2f}({top1.avg:.2f})'.format(
                      epoch, idx, len(train_loader), losses=at_losses, top1=top1))


def test(opt, test_loader, nets, criterions):
    top1 = AverageMeter()
    at_losses = AverageMeter()
    snet = nets['snet']
    tnet = nets['tnet']
    criterionAT = criterions['criterionAT']

    snet.eval()
    for img, target in test_loader:
        img, target = img.cuda(), target.cuda()
        with torch.no_grad():
            activation1_s, activation2_s, activation3_s, output_s = snet(img)
            activation1_t, activation2_t, activation3_t, _ = tnet(img)
            at_loss = (at_term(criterionAT, activation3_s, activation3_t, opt.beta3)
                       + at_term(criterionAT, activation2_s, activation2_t, opt.beta2)
                       + at_term(criterionAT, activation1_s, activation1_t, opt.beta1))
        prec1, _ = accuracy(output_s, target, topk=(1, 5))
        top1.update(prec1.item(), img.size(0))
        at_losses.update(at_loss.item(), img.size(0))
    return top1.avg, at_losses.avg


def train(opt):
    teacher = select_model(dataset=opt.data_name, model_name=opt.t_name, pretrained=True,
                           pretrained_models_path=opt.t_model, n_classes=opt.num_class).to(opt.device)
    student = select_model(dataset=opt.data_name, model_name=opt.s_name, pretrained=True,
                           pretrained_models_path=opt.s_model, n_classes=opt.num_class).to(opt.device)
    teacher.eval()
    for param in teacher.parameters():
        param.requires_grad = False
    nets = {'snet': student, 'tnet': teacher}

    optimizer = torch.optim.SGD(student.parameters(), lr=opt.lr, momentum=opt.momentum,
                                weight_decay=opt.weight_decay, nesterov=True)
    criterions = {'criterionCls': nn.CrossEntropyLoss(), 'criterionAT': AT(opt.p)}

    train_loader = get_train_loader(opt)
    test_clean_loader, _ = get_test_loader(opt)

    for epoch in range(0, opt.epochs):
        adjust_learning_rate(optimizer, epoch, opt.lr)
        train_step(opt, train_loader, nets, optimizer, criterions, epoch + 1)
        acc_clean, _ = test(opt, test_clean_loader, nets, criterions)
        if opt.save:
            save_checkpoint({
                'epoch': epoch,
                'state_dict': student.state_dict(),
                'best_clean_acc': acc_clean,
                'optimizer': optimizer.state_dict(),
            }, False, opt.checkpoint_root, opt.s_name)


if __name__ == '__main__':
    train(get_arguments().parse_args())
