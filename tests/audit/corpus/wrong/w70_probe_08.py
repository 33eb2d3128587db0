def freeze_backbone(model):
    for name, param in model.backbone.named_parameters():
        param.requires_grad_ = False  # expect: TB302
    model.head.weight.require_grad = True  # expect: TB302
