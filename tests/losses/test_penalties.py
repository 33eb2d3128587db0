"""gradient_penalty against a linear critic and a per-sample naive loop; l1_penalty against a naive sum."""

import pytest
import torch
from torch import nn

from trickbag.losses import gradient_penalty, l1_penalty


def _critic(seed=0, d=6):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(d, 8), nn.Tanh(), nn.Linear(8, 1)).double()


def _batch(n=5, shape=(2, 3), seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, *shape, generator=g, dtype=torch.float64), torch.randn(
        n, *shape, generator=g, dtype=torch.float64
    )


def test_linear_critic_penalty_is_norm_of_w_minus_one_squared():
    real, fake = _batch()
    w = torch.randn(6, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    pen = gradient_penalty(lambda x: x.flatten(1) @ w, real, fake, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(pen, (w.norm() - 1) ** 2)


def _naive_penalty(critic, real, fake, seed):
    eps = torch.rand(real.shape[0], generator=torch.Generator().manual_seed(seed), dtype=real.dtype)
    terms = []
    for i in range(real.shape[0]):
        x = (eps[i] * real[i] + (1 - eps[i]) * fake[i]).unsqueeze(0).requires_grad_(True)
        (g,) = torch.autograd.grad(critic(x).sum(), x, create_graph=True)
        terms.append((g.flatten().norm() - 1) ** 2)
    return torch.stack(terms).mean()


def test_matches_naive_per_sample_loop_and_param_gradients():
    real, fake = _batch()
    critic = _critic()
    pen = gradient_penalty(critic, real, fake, generator=torch.Generator().manual_seed(3))
    ref = _naive_penalty(critic, real, fake, seed=3)
    torch.testing.assert_close(pen, ref)
    params = list(critic.parameters())
    grads = torch.autograd.grad(pen, params, allow_unused=True)
    ref_grads = torch.autograd.grad(ref, params, allow_unused=True)
    # the last bias shifts D but not grad_x D, so neither version gives it a gradient
    assert grads[-1] is None and ref_grads[-1] is None
    for g, rg in zip(grads[:-1], ref_grads[:-1]):
        torch.testing.assert_close(g, rg)


def test_backward_reaches_critic_parameters_but_not_inputs():
    real, fake = _batch()
    real.requires_grad_(True)
    fake.requires_grad_(True)
    critic = _critic(seed=4)
    gradient_penalty(critic, real, fake, generator=torch.Generator().manual_seed(0)).backward()
    *inner, last_bias = critic.parameters()  # last bias does not change grad_x D
    for p in inner:
        assert p.grad is not None and p.grad.abs().sum() > 0
    assert last_bias.grad is None
    assert real.grad is None and fake.grad is None


def test_pinned_generator_is_reproducible_and_eps_is_random():
    real, fake = _batch(n=8, shape=(6,))
    critic = _critic(seed=5)
    a = gradient_penalty(critic, real, fake, generator=torch.Generator().manual_seed(7))
    b = gradient_penalty(critic, real, fake, generator=torch.Generator().manual_seed(7))
    c = gradient_penalty(critic, real, fake, generator=torch.Generator().manual_seed(8))
    assert a.item() == b.item()
    assert a.item() != c.item()


def test_works_with_rank_one_samples_and_under_no_grad():
    real, fake = _batch(n=4, shape=())
    critic = lambda x: 3.0 * x  # noqa: E731 - gradient 3 for every sample: (3 - 1)^2
    with torch.no_grad():
        pen = gradient_penalty(critic, real, fake)
    torch.testing.assert_close(pen, torch.tensor(4.0, dtype=torch.float64))


def test_gradient_penalty_validation():
    real, fake = _batch()
    with pytest.raises(ValueError, match="same non-empty shape"):
        gradient_penalty(_critic(), real, fake[:3])
    with pytest.raises(TypeError, match="callable"):
        gradient_penalty("critic", real, fake)
    with pytest.raises(TypeError, match="real"):
        gradient_penalty(_critic(), real.long(), fake)
    with pytest.raises(ValueError, match="one score per sample"):
        gradient_penalty(lambda x: x, real, fake)
    with pytest.raises(ValueError, match="does not depend"):
        gradient_penalty(lambda x: torch.zeros(x.shape[0], requires_grad=True), real, fake)
    with pytest.raises(TypeError, match="generator"):
        gradient_penalty(_critic(), real, fake, generator=0)


def test_l1_penalty_matches_naive_sum_and_gradient_is_sign():
    model = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 3))
    params = list(model.parameters())
    naive = sum(p.detach().abs().sum() for p in params)
    pen = l1_penalty(model.parameters())
    torch.testing.assert_close(pen, naive)
    pen.backward()
    for p in params:
        torch.testing.assert_close(p.grad, torch.sign(p.detach()))


def test_l1_penalty_tensor_empty_and_mixed_dtypes():
    t = torch.tensor([[1.5, -2.0], [0.0, 3.0]])
    torch.testing.assert_close(l1_penalty(t), torch.tensor(6.5))
    torch.testing.assert_close(l1_penalty([]), torch.tensor(0.0))
    mixed = [torch.tensor([1.0, -1.0], dtype=torch.float16), torch.tensor([-0.25], dtype=torch.float64)]
    out = l1_penalty(mixed)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, torch.tensor(2.25, dtype=torch.float64))


def test_l1_penalty_validation():
    with pytest.raises(TypeError, match="iterable"):
        l1_penalty(3.0)
    with pytest.raises(TypeError, match=r"parameters\[1\]"):
        l1_penalty([torch.ones(2), 2.0])
    with pytest.raises(TypeError, match="floating"):
        l1_penalty([torch.ones(2, dtype=torch.long)])
