"""focal_loss against F.cross_entropy, a naive per-sample loop, finite differences and torchvision."""

import math

import pytest
import torch
import torch.nn.functional as F
import torchvision

from trickbag.losses import FocalLoss, focal_loss, sigmoid_focal_loss, smooth_targets


def _data(n=7, c=4, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, c, generator=g, dtype=dtype) * 2
    y = torch.randint(0, c, (n,), generator=g)
    q = torch.softmax(torch.randn(n, c, generator=g, dtype=dtype), 1)
    return logits, y, q


def _naive_focal(logits, q, gamma, alpha=None, weight=None):
    """Per-sample Python loop of -sum_c w_c a_c (1 - p_c)^gamma q_c log p_c with math.exp/log."""
    out = []
    for row, qrow in zip(logits.tolist(), q.tolist()):
        m = max(row)
        z = sum(math.exp(v - m) for v in row)
        total = 0.0
        for c, (v, qc) in enumerate(zip(row, qrow)):
            p = math.exp(v - m) / z
            a = 1.0 if alpha is None else float(alpha[c])
            w = 1.0 if weight is None else float(weight[c])
            total += -w * a * (1 - p) ** gamma * qc * math.log(p)
        out.append(total)
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_gamma_zero_is_cross_entropy(reduction):
    logits, y, q = _data()
    torch.testing.assert_close(
        focal_loss(logits, y, gamma=0.0, reduction=reduction), F.cross_entropy(logits, y, reduction=reduction)
    )
    torch.testing.assert_close(
        focal_loss(logits, q, gamma=0.0, reduction=reduction), F.cross_entropy(logits, q, reduction=reduction)
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_gamma_zero_with_weight_follows_cross_entropy_weight_semantics(reduction):
    logits, y, q = _data(seed=1)
    w = torch.tensor([0.2, 1.0, 3.0, 0.7], dtype=torch.float64)
    # int labels: weighted mean (divide by sum of w[y]); probabilities: plain mean over N
    torch.testing.assert_close(
        focal_loss(logits, y, gamma=0.0, weight=w, reduction=reduction),
        F.cross_entropy(logits, y, weight=w, reduction=reduction),
    )
    torch.testing.assert_close(
        focal_loss(logits, q, gamma=0.0, weight=w, reduction=reduction),
        F.cross_entropy(logits, q, weight=w, reduction=reduction),
    )


@pytest.mark.parametrize("gamma", [0.5, 1.0, 2.0, 3.5])
def test_matches_naive_loop_int_and_soft_targets(gamma):
    logits, y, q = _data(seed=2)
    alpha = torch.tensor([0.25, 0.5, 1.0, 0.75], dtype=torch.float64)
    onehot = F.one_hot(y, 4).to(torch.float64)
    for target, q_ref in ((y, onehot), (q, q), (smooth_targets(y, 4, 0.1).double(), smooth_targets(y, 4, 0.1))):
        for a in (None, alpha):
            got = focal_loss(logits, target, gamma=gamma, alpha=a, reduction="none")
            assert isinstance(got, torch.Tensor) and got.shape == (7,)
            ref = _naive_focal(logits, q_ref, gamma, a)
            torch.testing.assert_close(got, ref)
            torch.testing.assert_close(focal_loss(logits, target, gamma=gamma, alpha=a), ref.mean())
            torch.testing.assert_close(focal_loss(logits, target, gamma=gamma, alpha=a, reduction="sum"), ref.sum())


def test_alpha_and_weight_combine_multiplicatively():
    logits, y, _ = _data(seed=3)
    alpha = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    w = torch.tensor([2.0, 1.0, 0.5, 4.0], dtype=torch.float64)
    per = _naive_focal(logits, F.one_hot(y, 4).double(), 2.0, alpha, w)
    torch.testing.assert_close(focal_loss(logits, y, 2.0, alpha, weight=w, reduction="none"), per)
    torch.testing.assert_close(focal_loss(logits, y, 2.0, alpha, weight=w), per.sum() / w[y].sum())


def test_focal_down_weights_easy_examples_relative_to_ce():
    logits = torch.tensor([[4.0, 0.0, 0.0], [0.0, 4.0, 0.0]])
    y = torch.tensor([0, 0])  # first is easy (p high), second is hard
    ratio = focal_loss(logits, y, 2.0, reduction="none") / F.cross_entropy(logits, y, reduction="none")
    p_true = torch.softmax(logits, 1)[torch.arange(2), y]
    torch.testing.assert_close(ratio, (1 - p_true) ** 2)
    assert ratio[0] < 0.01 < 0.9 < ratio[1]


def test_float_alpha_on_two_classes_equals_torchvision_sigmoid_focal():
    g = torch.Generator().manual_seed(4)
    z = torch.randn(9, generator=g, dtype=torch.float64) * 3
    y = torch.randint(0, 2, (9,), generator=g)
    # softmax over [0, z] gives p(class 1) = sigmoid(z): the two-class softmax focal loss is the sigmoid one
    logits = torch.stack([torch.zeros_like(z), z], 1)
    for alpha in (0.25, 0.8):
        for gamma in (0.0, 2.0):
            ref = torchvision.ops.sigmoid_focal_loss(z, y.double(), alpha=alpha, gamma=gamma, reduction="none")
            torch.testing.assert_close(focal_loss(logits, y, gamma, alpha, reduction="none"), ref)


@pytest.mark.parametrize("alpha,gamma,reduction", [(0.25, 2.0, "none"), (0.8, 0.0, "mean"), (-1, 1.5, "sum")])
def test_sigmoid_focal_loss_is_torchvisions(alpha, gamma, reduction):
    g = torch.Generator().manual_seed(5)
    z = torch.randn(4, 3, generator=g, dtype=torch.float64) * 3
    y = (torch.rand(4, 3, generator=g) > 0.5).double()
    ref = torchvision.ops.sigmoid_focal_loss(z, y, alpha=alpha, gamma=gamma, reduction=reduction)
    assert torch.equal(sigmoid_focal_loss(z, y, alpha=alpha, gamma=gamma, reduction=reduction), ref)
    assert torch.equal(sigmoid_focal_loss(z, y, alpha, gamma, reduction), ref)  # the same positional order


def test_importing_the_losses_does_not_import_torchvision():
    import subprocess
    import sys

    code = "import sys, trickbag.losses; print('torchvision' in sys.modules, 'torch._dynamo' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "False"], out.stderr


def test_stable_and_finite_gradients_for_saturated_logits():
    logits = torch.tensor([[200.0, 0.0, -50.0], [0.0, 120.0, 0.0], [30.0, 0.0, 0.0]], requires_grad=True)
    y = torch.tensor([0, 0, 2])
    for gamma in (0.5, 2.0):
        loss = focal_loss(logits, y, gamma=gamma, reduction="none")
        assert torch.isfinite(loss).all()
        # sample 1: log p_true = -120, (1 - p) == 1 => loss 120; sample 0 saturated correct => ~0
        torch.testing.assert_close(loss[1], torch.tensor(120.0))
        assert loss[0] == 0.0
        logits.grad = None
        loss.sum().backward()
        assert torch.isfinite(logits.grad).all()


def test_gradcheck_against_finite_differences():
    logits, y, q = _data(n=3, c=3, seed=5)
    logits.requires_grad_(True)
    alpha = torch.tensor([0.3, 0.5, 0.2], dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda x: focal_loss(x, y, 1.5, alpha), (logits,))
    assert torch.autograd.gradcheck(lambda x: focal_loss(x, q, 2.0), (logits,))


def test_focal_loss_module_matches_function_and_moves_buffers():
    logits, y, _ = _data(seed=6, dtype=torch.float32)
    alpha = torch.tensor([0.1, 0.2, 0.3, 0.4])
    w = torch.tensor([1.0, 2.0, 3.0, 4.0])
    mod = FocalLoss(gamma=1.5, alpha=alpha, weight=w, reduction="sum")
    assert set(dict(mod.named_buffers())) == {"alpha", "weight"}
    torch.testing.assert_close(mod(logits, y), focal_loss(logits, y, 1.5, alpha, weight=w, reduction="sum"))
    mod64 = mod.double()
    assert mod64.alpha.dtype == torch.float64
    binary = FocalLoss(gamma=2.0, alpha=0.25)
    z = torch.randn(4, 2, generator=torch.Generator().manual_seed(7))
    yb = torch.tensor([0, 1, 1, 0])
    torch.testing.assert_close(binary(z, yb), focal_loss(z, yb, 2.0, 0.25))


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(gamma=-1.0), ValueError, "gamma"),
        (dict(gamma=float("nan")), ValueError, "gamma"),
        (dict(alpha=0.25), ValueError, "C == 2"),
        (dict(alpha=1.5), ValueError, "alpha"),
        (dict(alpha=torch.ones(3)), ValueError, "alpha"),
        (dict(alpha="x"), TypeError, "alpha"),
        (dict(weight=torch.ones(5)), ValueError, "weight"),
        (dict(reduction="batchmean"), ValueError, "reduction"),
    ],
)
def test_focal_validation(kwargs, exc, match):
    logits, y, _ = _data()
    with pytest.raises(exc, match=match):
        focal_loss(logits, y, **kwargs)


def test_focal_target_validation():
    logits, _, _ = _data()
    with pytest.raises(ValueError, match=r"\[0, 3\]"):
        focal_loss(logits, torch.full((7,), 4))
    with pytest.raises(ValueError, match=r"\[N\]"):
        focal_loss(logits, torch.zeros(6, dtype=torch.long))
    with pytest.raises(ValueError, match="shape"):
        focal_loss(logits, torch.zeros(7, 3, dtype=torch.float64))
    with pytest.raises(TypeError, match="dtype"):
        focal_loss(logits, torch.zeros(7, dtype=torch.bool))
    with pytest.raises(ValueError, match="gamma"):
        FocalLoss(gamma=-0.5)
    with pytest.raises(ValueError, match="alpha"):
        FocalLoss(alpha=2.0)
