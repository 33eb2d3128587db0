"""TB303 on sigmoid probabilities fed to a loss that applies the sigmoid itself (the kind of real mistake 209,
LMFD-PAD, whose marked line is the model's sigmoid; the rule reports the loss call).  Wrong shapes reported at the
loss, right ones silent with ``--all`` too."""

from __future__ import annotations

from tests.audit.helpers import found

DIRECT = """
    import torch
    import torch.nn.functional as F
    from torch import nn

    crit = nn.BCEWithLogitsLoss()

    def step(model, x, y, optimizer):
        out = model(x)
        {pred}
        loss = {loss}
        loss.backward()
        optimizer.step()
"""


def test_sigmoid_into_a_logits_loss():
    for pred, loss in [("p = torch.sigmoid(out)", "F.binary_cross_entropy_with_logits(p, y)"),
                       ("p = out.sigmoid().view(-1)", "crit(p, y)"),
                       ("p = torch.softmax(out, 1)", "F.binary_cross_entropy_with_logits(p, y)")]:
        assert found(DIRECT.format(pred=pred, loss=loss), "TB303") == [11], (pred, loss)


def test_logits_or_a_probability_loss_are_right():
    for pred, loss in [("p = out", "F.binary_cross_entropy_with_logits(p, y)"),
                       ("p = torch.sigmoid(out)", "F.binary_cross_entropy(p, y)"),
                       ("p = torch.sigmoid(out)", "crit(out, y)")]:
        assert found(DIRECT.format(pred=pred, loss=loss), "TB303", show_all=True) == [], (pred, loss)


MODEL = """
    import torch
    import torch.nn.functional as F
    from torch import nn

    class FocalLoss(nn.Module):
        def forward(self, inputs, targets):
            bce = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
            return ((1 - torch.exp(-bce)) ** 2 * bce).mean()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Linear(8, 8)
            self.cls = nn.Linear(8, 1)
            self.depth = nn.Linear(8, 4)

        def forward(self, x):
            h = self.body(x)
            x = self.cls(h)
            {last}
            return x, self.depth(h)

    def train(loader, optimizer):
        model = Net()
        crit = FocalLoss()
        for images, labels in loader:
            pred, depth = model(images)
            pred = torch.squeeze(pred)
            loss = crit(pred.type(torch.FloatTensor), labels)
            loss.backward()
            optimizer.step()
"""


def test_a_model_returning_a_sigmoid_item_into_a_focal_loss_on_logits():
    assert found(MODEL.format(last="x = torch.sigmoid(x)"), "TB303") == [30]
    assert found(MODEL.format(last="x = x * 1.0"), "TB303", show_all=True) == []
