# TB302 misspelled-attribute: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)
import torch


def freeze_backbone_typo(model):
    for p in model.backbone.parameters():
        p.required_grad = False  # expect: TB302


def freeze_backbone(model):
    for p in model.backbone.parameters():
        p.requires_grad = False


def freeze_named(model):
    for name, v in model.named_parameters():
        if name.startswith("backbone"):
            v.requires_grad = False  # v is a Parameter: the right attribute


def freeze_module(model):
    model.backbone.requires_grad = False  # expect: TB302


def freeze_module_method(model):
    model.backbone.requires_grad_(False)


def cudnn_typo():
    torch.backends.cudnn.benchmarks = True  # expect: TB302


def cudnn_right():
    torch.backends.cudnn.benchmark = True


def setattr_typo(p):
    setattr(p, "requires_grads", False)  # expect: TB302
