import torchvision


def build_model(num_classes=10):
    model = torchvision.models.resnet18(weights="IMAGENET1K_V1")
    for name, param in model.named_parameters():
        if not name.startswith("fc"):
            param.required_grad = False  # expect: TB302
    model.fc = torchvision.models.resnet.nn.Linear(512, num_classes)
    return model
