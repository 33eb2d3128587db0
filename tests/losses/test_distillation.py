"""distillation_loss against explicit sums of Hinton et al. 2015's formula; DistillationLoss mixing."""

import math

import pytest
import torch
import torch.nn.functional as F

from trickbag.losses import DistillationLoss, FocalLoss, distillation_loss, focal_loss


def _data(n=5, c=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(n, c, generator=g, dtype=torch.float64) * 2
    t = torch.randn(n, c, generator=g, dtype=torch.float64) * 2
    return s, t


def _softmax(row, temp):
    e = [math.exp(v / temp) for v in row]
    z = sum(e)
    return [x / z for x in e]


def _naive_kd(student, teacher, temp):
    """Per sample: T^2 * sum_c p_c (log p_c - log q_c), p = teacher softmax, q = student softmax."""
    out = []
    for srow, trow in zip(student.tolist(), teacher.tolist()):
        p, q = _softmax(trow, temp), _softmax(srow, temp)
        out.append(temp**2 * sum(pc * (math.log(pc) - math.log(qc)) for pc, qc in zip(p, q)))
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("temp", [1.0, 2.0, 4.0, 10.0])
def test_matches_explicit_sums_all_reductions(temp):
    s, t = _data()
    ref = _naive_kd(s, t, temp)
    torch.testing.assert_close(distillation_loss(s, t, temp, reduction="none"), ref)
    torch.testing.assert_close(distillation_loss(s, t, temp), ref.mean())
    torch.testing.assert_close(distillation_loss(s, t, temp, reduction="sum"), ref.sum())


def test_kl_direction_is_teacher_to_student():
    s, t = _data(seed=1)
    forward = distillation_loss(s, t, 2.0, reduction="none")
    reversed_ = _naive_kd(t, s, 2.0)  # KL(student || teacher): the classic reversed-direction bug
    assert not torch.allclose(forward, reversed_, rtol=1e-3)
    torch.testing.assert_close(forward, _naive_kd(s, t, 2.0))


def test_gradient_is_t_times_softmax_difference_so_t_squared_is_present():
    # d/dz_s [T^2 KL(p || softmax(z_s / T))] = T * (q - p)  (Hinton et al. 2015, eq. 2 times T^2)
    s, t = _data(seed=2)
    for temp in (1.0, 3.0, 8.0):
        x = s.clone().requires_grad_(True)
        distillation_loss(x, t, temp, reduction="sum").backward()
        expected = temp * (torch.softmax(s / temp, 1) - torch.softmax(t / temp, 1))
        torch.testing.assert_close(x.grad, expected)


def test_high_temperature_gradient_is_independent_of_t():
    # Hinton et al.: for large T and zero-mean logits, T^2-scaled gradient -> (z - v) / C
    s, t = _data(n=3, c=5, seed=3)
    s, t = s - s.mean(1, keepdim=True), t - t.mean(1, keepdim=True)
    x = s.clone().requires_grad_(True)
    distillation_loss(x, t, 1000.0, reduction="sum").backward()
    torch.testing.assert_close(x.grad, (s - t) / 5, rtol=0, atol=1e-3)


def test_teacher_is_detached():
    s, t = _data(seed=4)
    s.requires_grad_(True)
    t.requires_grad_(True)
    distillation_loss(s, t, 4.0).backward()
    assert t.grad is None
    assert s.grad is not None and s.grad.abs().sum() > 0


def test_zero_when_student_equals_teacher_and_positive_otherwise():
    s, t = _data(seed=5)
    torch.testing.assert_close(distillation_loss(s, s.clone(), 3.0), torch.tensor(0.0, dtype=torch.float64))
    assert (distillation_loss(s, t, 3.0, reduction="none") > 0).all()


def test_distillation_module_mixes_soft_and_hard_terms():
    s, t = _data(seed=6)
    y = torch.tensor([0, 3, 1, 1, 2])
    mod = DistillationLoss(temperature=3.0, alpha=0.3)
    expected = 0.3 * _naive_kd(s, t, 3.0).mean() + 0.7 * F.cross_entropy(s, y)
    torch.testing.assert_close(mod(s, t, y), expected)
    torch.testing.assert_close(DistillationLoss(3.0, alpha=1.0)(s, t, y), _naive_kd(s, t, 3.0).mean())
    torch.testing.assert_close(DistillationLoss(3.0, alpha=0.0)(s, t, y), F.cross_entropy(s, y))


def test_distillation_module_accepts_soft_targets_and_custom_hard_loss():
    s, t = _data(seed=7)
    y = torch.tensor([0, 3, 1, 1, 2])
    lam = 0.6
    mixed = lam * F.one_hot(y, 4).double() + (1 - lam) * F.one_hot(y.flip(0), 4).double()
    mod = DistillationLoss(temperature=2.0, alpha=0.5)
    expected_hard = lam * F.cross_entropy(s, y) + (1 - lam) * F.cross_entropy(s, y.flip(0))
    torch.testing.assert_close(mod(s, t, mixed), 0.5 * _naive_kd(s, t, 2.0).mean() + 0.5 * expected_hard)
    focal_mod = DistillationLoss(temperature=2.0, alpha=0.25, hard_loss=FocalLoss(gamma=2.0))
    torch.testing.assert_close(
        focal_mod(s, t, y), 0.25 * _naive_kd(s, t, 2.0).mean() + 0.75 * focal_loss(s, y, 2.0)
    )


def test_distillation_validation():
    s, t = _data()
    with pytest.raises(ValueError, match="temperature"):
        distillation_loss(s, t, 0.0)
    with pytest.raises(ValueError, match="batchmean"):
        distillation_loss(s, t, reduction="mean")
    with pytest.raises(ValueError, match="reduction"):
        distillation_loss(s, t, reduction="avg")
    with pytest.raises(ValueError, match="same shape"):
        distillation_loss(s, t[:, :3])
    with pytest.raises(ValueError, match="alpha"):
        DistillationLoss(alpha=1.5)
    with pytest.raises(ValueError, match="temperature"):
        DistillationLoss(temperature=-1)
    with pytest.raises(TypeError, match="hard_loss"):
        DistillationLoss(hard_loss="ce")
