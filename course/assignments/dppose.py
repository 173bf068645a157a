# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (privkit)
#     language: python
#     name: python3
#   privkit_course:
#     title: Differentially private training for pose estimation
#     forbidden_imports: [privkit.dppose, privkit.privacy, privkit.studies, opacus.grad_sample, opacus.optimizers, opacus.privacy_engine]
# ---

# %% [markdown]
# ```otter
# # ASSIGNMENT CONFIG
# name: dppose
# init_cell: true
# check_all_cell: false
# export_cell: false
# run_tests: false
# solutions_pdf: false
# generate: true
# tests:
#   files: true
# ```

# %% [markdown]
# # Assignment: differentially private training for pose estimation
#
# The DP pose paper (Sivangi, Henderson & Deligianni, CVPR 2026) fine-tunes a 2-D human pose network on private
# images so that the trained weights are differentially private with respect to every training image. The
# workhorse is **DP-SGD**: at each step a batch is drawn by Poisson sampling (every record joins independently
# with probability $q$), each record's gradient is clipped to L2 norm $C$, the clipped gradients are summed, and
# Gaussian noise of standard deviation $\sigma C$ is added before averaging. A **privacy accountant** turns the
# sampling rate, the noise multiplier $\sigma$, the number of steps and $\delta$ into the $\varepsilon$ that was
# spent. The paper's improvement, **projected DP-SGD**, removes most of that noise by projecting the noisy
# gradient onto a low-dimensional subspace estimated from *public* data (which costs no privacy).
#
# You will build each piece on a tiny model instead of the real pose network: a two-layer MLP playing the role of
# a SimCC head. SimCC treats a joint coordinate as a classification over bins: the network outputs one logit per
# bin, the label is a small normalised Gaussian bump centred on the true coordinate, and the loss is the KL
# divergence between label and softmax, averaged over the batch. Here the "image features" are random vectors
# and the coordinate is a fixed function of them, all seeded, so that everything runs in seconds on a CPU.
#
# **Rules.** Write your answers in the cells that contain `...`. Run `grader.check("qN")` after each question to
# run its visible tests; hidden tests run when your notebook is graded. You may use `math`, `numpy`, `scipy`,
# `torch` (including `torch.func`) and **`opacus.accountants`** (you need its `RDPAccountant` in Q3). You may
# not import `privkit.dppose`, `privkit.privacy`, `privkit.studies`, `opacus.grad_sample`,
# `opacus.optimizers` or `opacus.privacy_engine` (they contain the answers): a submission that imports any of
# them, or a submodule of one, gets no marks.

# %%
import math
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from opacus.accountants import RDPAccountant
from torch import nn
from torch.func import functional_call, grad, vmap

torch.set_default_dtype(torch.float64)

# %% [markdown]
# ## The tiny stand-in for the pose network
#
# `make_head` builds the MLP (8 input features, 16 hidden units, `n_bins` logits for one coordinate);
# `soft_labels` makes the SimCC Gaussian labels and `simcc_loss` is the batch-mean KL divergence.
# `make_data` draws features and coordinates; the private and the public sets come from the same
# distribution but are disjoint (in the paper the public set is COCO and the private set MPII).

# %%
N_FEAT, N_BINS = 8, 12


def make_head(seed=0, n_feat=N_FEAT, n_bins=N_BINS):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(n_feat, 16), nn.Tanh(), nn.Linear(16, n_bins))


def soft_labels(coord, n_bins=N_BINS, width=1.0):
    bins = torch.arange(n_bins, dtype=torch.get_default_dtype())
    w = torch.exp(-0.5 * ((bins - coord[:, None]) / width) ** 2)
    return w / w.sum(1, keepdim=True)


def simcc_loss(logits, labels):
    """KL(labels || softmax(logits)), summed over bins and averaged over the batch."""
    return F.kl_div(F.log_softmax(logits, dim=-1), labels, reduction="batchmean")


def make_data(n, seed, n_feat=N_FEAT, n_bins=N_BINS):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, n_feat, generator=g)
    direction = torch.linspace(-1.0, 1.0, n_feat)
    coord = (n_bins - 1) / 2 + 2.5 * torch.tanh(x @ direction / 2)
    return x, soft_labels(coord, n_bins)


x_private, y_private = make_data(2000, seed=1)
x_public, y_public = make_data(64, seed=2)

# %% [markdown]
# ```otter
# # BEGIN QUESTION
# name: q1
# points: 3
# ```

# %% [markdown]
# ## Q1. Per-sample gradients with `torch.func`
#
# DP-SGD bounds the influence of one record by clipping *that record's* gradient, so it needs the gradient of
# every example separately, not only the batch mean that `loss.backward()` gives. A loop of single-example
# backward passes works but is slow; `torch.func` computes all of them in one vectorised call:
#
# * `functional_call(model, params, (x,))` runs `model` with the parameter tensors taken from the dict
#   `params` (name -> tensor), so the loss becomes a plain function of `params`;
# * `grad(f)` returns a function computing the gradient of a scalar `f` with respect to its first argument
#   (here the dict `params`; the gradient is a dict with the same keys);
# * `vmap(h, in_dims=(None, 0, 0))` maps `h` over the leading dimension of its second and third arguments while
#   sharing the first.
#
# Inside the mapped function you see ONE example `x_i` (no batch dimension), but `model` and `loss_fn` expect a
# batch: give them a batch of one (`x_i.unsqueeze(0)`, `y_i.unsqueeze(0)`). `loss_fn(output, y)` returns the
# mean loss over its batch, so on a batch of one it is exactly that example's loss.
#
# Write `per_sample_grads(model, x, y, loss_fn)` returning a dict `{name: tensor of shape [B, *param.shape]}`
# with one entry per parameter of `model` (in `named_parameters()` order), where row `i` is the gradient of
# example `i`'s loss. Return detached tensors.

# %% [markdown]
# ```otter
# # BEGIN SOLUTION
# ```

# %%
def per_sample_grads(model, x, y, loss_fn):
    # BEGIN SOLUTION
    params = {name: p.detach() for name, p in model.named_parameters()}

    def example_loss(prm, xi, yi):
        out = functional_call(model, prm, (xi.unsqueeze(0),))
        return loss_fn(out, yi.unsqueeze(0))

    grads = vmap(grad(example_loss), in_dims=(None, 0, 0))(params, x, y)
    return {name: g.detach() for name, g in grads.items()}
    # END SOLUTION

# %% [markdown]
# ```otter
# # END SOLUTION
# ```

# %% [markdown]
# ```otter
# # BEGIN TESTS
# ```

# %%
_m = make_head(seed=5)
_x, _y = make_data(6, seed=6)
_ps = per_sample_grads(_m, _x, _y, simcc_loss)
assert isinstance(_ps, dict) and list(_ps) == [n for n, _ in _m.named_parameters()], \
    "return a dict with one entry per parameter, in named_parameters() order"
for _n, _p in _m.named_parameters():
    assert tuple(_ps[_n].shape) == (6, *_p.shape), f"{_n}: shape {tuple(_ps[_n].shape)}, expected {(6, *_p.shape)}"

# %%
# The per-sample gradients add up to B times the gradient of the batch-mean loss.
_m = make_head(seed=5)
_x, _y = make_data(6, seed=6)
_ps = per_sample_grads(_m, _x, _y, simcc_loss)
_m.zero_grad()
simcc_loss(_m(_x), _y).backward()
for _n, _p in _m.named_parameters():
    assert torch.allclose(_ps[_n].sum(0), 6 * _p.grad, atol=1e-8), \
        f"{_n}: the per-sample gradients do not sum to B x the batch gradient"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
# Against a loop of single-example backward passes (the SimCC loss, float64).
import torch
import torch.nn.functional as F
from torch import nn

_ = torch.manual_seed(11)
_hm = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 9)).double()
_hx = torch.randn(8, 5, dtype=torch.float64)
_hy = torch.softmax(torch.randn(8, 9, dtype=torch.float64), dim=1)


def _kl(out, lab):
    return F.kl_div(F.log_softmax(out, dim=-1), lab, reduction="batchmean")


_got = per_sample_grads(_hm, _hx, _hy, _kl)
for _i in range(8):
    _hm.zero_grad()
    _kl(_hm(_hx[_i:_i + 1]), _hy[_i:_i + 1]).backward()
    for _n, _p in _hm.named_parameters():
        assert torch.allclose(_got[_n][_i], _p.grad, atol=1e-6, rtol=0), \
            f"{_n}, example {_i}: differs from that example's own gradient"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
# Against privkit's reference on another model and loss (mean squared error).
import torch
from torch import nn
from privkit.dppose.grads import per_sample_grads as _ref_psg

_ = torch.manual_seed(12)
_hm2 = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3), nn.Tanh(), nn.Linear(3, 2)).double()
_hx2 = torch.randn(10, 4, dtype=torch.float64)
_hy2 = torch.randn(10, 2, dtype=torch.float64)
_mse = torch.nn.MSELoss()
_got2 = per_sample_grads(_hm2, _hx2, _hy2, _mse)
_ref2 = _ref_psg(_hm2, _mse, (_hx2, _hy2), method="vmap")
assert list(_got2) == list(_ref2), "one entry per parameter, in named_parameters() order"
for _n in _ref2:
    assert _got2[_n].shape == _ref2[_n].shape, f"{_n}: wrong shape"
    assert torch.allclose(_got2[_n], _ref2[_n], atol=1e-6, rtol=0), f"{_n}: differs from the reference"

# %% [markdown]
# ```otter
# # END TESTS
# ```

# %% [markdown]
# ```otter
# # END QUESTION
# ```

# %% [markdown]
# How different are the records? The per-example gradient norms of the stand-in head on 200 private records
# (the clipping norm of Q2 decides which of them get clipped):

# %%
try:
    _g = per_sample_grads(make_head(seed=0), x_private[:200], y_private[:200], simcc_loss)
    _norms = torch.cat([t.reshape(200, -1) for t in _g.values()], dim=1).norm(dim=1)
    print("per-example gradient norms: min {:.3f}, median {:.3f}, max {:.3f}".format(
        _norms.min().item(), _norms.median().item(), _norms.max().item()))
except Exception as exc:
    print("not yet:", exc)

# %% [markdown]
# ```otter
# # BEGIN QUESTION
# name: q2
# points: 3
# ```

# %% [markdown]
# ## Q2. Clipping and noise: one DP-SGD gradient
#
# Treat a record's gradient as ONE vector $g_i$, the concatenation of its gradients for all parameters
# together. DP-SGD clips it, sums, adds Gaussian noise and divides by the *expected* batch size
# $\bar B = q n$:
#
# $$\tilde g = \frac{1}{\bar B}\Big(\sum_{i \in \text{batch}} g_i \min\!\big(1, \tfrac{C}{\|g_i\|_2}\big)
#   + \mathcal N(0, \sigma^2 C^2 I)\Big).$$
#
# Adding or removing one record moves the clipped sum by at most $C$ in L2 norm (its sensitivity), which is why
# the noise scale is $\sigma C$. The norm must be taken over all parameters jointly: clipping each parameter
# tensor to $C$ separately lets one record move the sum by $C\sqrt{\#\text{tensors}}$. The divisor is the
# expected batch size, a public constant, and not the realised (random) size of the Poisson batch, which
# depends on the private data. (Libraries often use $C / (\|g_i\| + 10^{-6})$ to avoid a division by zero; either
# form passes the tests.)
#
# Write `clip_and_noise(per_sample, C, sigma, expected_batch, generator)`: `per_sample` is a dict
# `{name: [B, *shape]}` as returned in Q1; return a dict `{name: tensor of shape *shape}` (same keys, same
# order) holding $\tilde g$. Draw ALL the noise from `generator` (e.g.
# `torch.randn(shape, generator=generator, dtype=...)`), one independent standard normal per coordinate;
# with `sigma = 0` add no noise.

# %% [markdown]
# ```otter
# # BEGIN SOLUTION
# ```

# %%
def clip_and_noise(per_sample, C, sigma, expected_batch, generator):
    # BEGIN SOLUTION
    first = next(iter(per_sample.values()))
    b = first.shape[0]
    sq = sum(g.reshape(b, -1).pow(2).sum(1) for g in per_sample.values())
    factor = (C / (sq.sqrt() + 1e-6)).clamp(max=1.0)
    out = {}
    for name, g in per_sample.items():
        total = (g * factor.view(-1, *([1] * (g.ndim - 1)))).sum(0)
        if sigma > 0:
            total = total + sigma * C * torch.randn(total.shape, generator=generator, dtype=total.dtype)
        out[name] = total / expected_batch
    return out
    # END SOLUTION

# %% [markdown]
# ```otter
# # END SOLUTION
# ```

# %% [markdown]
# ```otter
# # BEGIN TESTS
# ```

# %%
# Two records: the first (norm 5 over both tensors) is clipped to norm 1, the second (norm 0.5) is kept.
_ps = {"w": torch.tensor([[3.0, 0.0], [0.3, 0.0]]), "b": torch.tensor([[4.0], [0.4]])}
_out = clip_and_noise(_ps, 1.0, 0.0, 2, torch.Generator().manual_seed(0))
assert isinstance(_out, dict) and list(_out) == ["w", "b"], "return a dict with the keys of per_sample, in order"
assert tuple(_out["w"].shape) == (2,) and tuple(_out["b"].shape) == (1,), "each entry has the parameter's shape"
assert torch.allclose(_out["w"], torch.tensor([0.45, 0.0]), atol=1e-5), f"w: got {_out['w']}, expected [0.45, 0]"
assert torch.allclose(_out["b"], torch.tensor([0.6]), atol=1e-5), f"b: got {_out['b']}, expected [0.6]"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
# sigma = 0: the clipped sum divided by the expected batch size, against privkit's per-record clipping.
import torch
from privkit.dppose.grads import clip_per_sample as _ref_clip

_g = torch.Generator().manual_seed(21)
_ps = {"a": 0.4 * torch.randn(9, 3, 4, generator=_g, dtype=torch.float64),
       "b": 0.4 * torch.randn(9, 5, generator=_g, dtype=torch.float64)}
_ps["a"][0] *= 0.05  # one record stays under the clipping norm
_ps["b"][0] *= 0.05
_ref = {n: t.sum(0) / 12 for n, t in _ref_clip(_ps, 0.3).items()}
_got = clip_and_noise({n: t.clone() for n, t in _ps.items()}, 0.3, 0.0, 12, torch.Generator().manual_seed(0))
assert list(_got) == ["a", "b"], "return a dict with the keys of per_sample, in order"
for _n in _ref:
    assert torch.allclose(_got[_n].double(), _ref[_n], rtol=1e-5, atol=1e-9), \
        f"{_n}: with sigma = 0 the result must be the per-record clipped sum / expected_batch"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
# sigma > 0: the noise (output x expected_batch - clipped sum) / C is N(0, sigma^2) per coordinate, and it
# comes from the generator.
import torch
from scipy.stats import kstest
from privkit.dppose.grads import clip_per_sample as _ref_clip

_g = torch.Generator().manual_seed(22)
_ps = {"w": torch.randn(16, 40, 60, generator=_g, dtype=torch.float64),
       "b": torch.randn(16, 40, generator=_g, dtype=torch.float64)}
_C, _sig, _eb = 0.3, 1.7, 20
_sum = torch.cat([t.sum(0).reshape(-1) for t in _ref_clip(_ps, _C).values()])
_o1 = clip_and_noise(_ps, _C, _sig, _eb, torch.Generator().manual_seed(7))
_o2 = clip_and_noise(_ps, _C, _sig, _eb, torch.Generator().manual_seed(7))
_o3 = clip_and_noise(_ps, _C, _sig, _eb, torch.Generator().manual_seed(8))
_f1, _f2, _f3 = (torch.cat([o[n].double().reshape(-1) for n in ("w", "b")]) for o in (_o1, _o2, _o3))
assert torch.equal(_f1, _f2), "the same generator seed must give the same output (use the generator)"
assert not torch.equal(_f1, _f3), "different generator seeds must give different noise"
_z = ((_f1 * _eb - _sum) / _C).numpy()
_n = _z.size
assert abs(_z.mean()) < 5 * _sig / _n ** 0.5, f"the noise should have mean 0, got {_z.mean():.4f}"
assert abs(_z.std() / _sig - 1) < 5 / (2 * _n) ** 0.5, \
    f"(noise / C) should have std sigma = {_sig}, got {_z.std():.4f}"
_p = kstest(_z / _sig, "norm").pvalue
assert _p > 1e-3, f"the noise / (sigma C) is not standard normal (KS p = {_p:.2e})"

# %% [markdown]
# ```otter
# # END TESTS
# ```

# %% [markdown]
# ```otter
# # END QUESTION
# ```

# %% [markdown]
# ```otter
# # BEGIN QUESTION
# name: q3
# points: 2
# ```

# %% [markdown]
# ## Q3. How much privacy did training spend?
#
# Each DP-SGD step is a *Poisson-subsampled Gaussian mechanism*: a record enters the batch with probability $q$
# and, if it does, its clipped gradient is hidden under noise of $\sigma$ times its sensitivity. Rényi DP makes
# the composition of many steps simple (the Rényi divergences of the steps add up, order by order); the
# accountant then converts the total into the smallest $\varepsilon$ for which $(\varepsilon, \delta)$-DP holds.
# The paper trains 25 epochs at an expected batch of 32, i.e. $q = 32/n$ and $25/q$ steps, and reports
# $\varepsilon$ between 0.2 and 0.8 at $\delta \approx 4 \cdot 10^{-5}$.
#
# Use `opacus.accountants.RDPAccountant` (imported above). It keeps a history of
# `(noise_multiplier, sample_rate, num_steps)` entries: call `acc.step(noise_multiplier=..., sample_rate=...)`
# once per training step (consecutive identical steps are merged into one entry), or set
# `acc.history = [(sigma, q, steps)]` directly; then `acc.get_epsilon(delta)` gives $\varepsilon$.
# (At extreme settings it may warn that the optimal Rényi order is at the edge of its grid; the value is still a
# valid bound, so you may silence `UserWarning` there.) Write
#
# * `epsilon_after(q, sigma, steps, delta)`: $\varepsilon$ after `steps` DP-SGD steps with sampling rate `q` and
#   noise multiplier `sigma`;
# * `sigma_for(target_epsilon, q, steps, delta)`: the smallest noise multiplier with
#   `epsilon_after(q, sigma, steps, delta) <= target_epsilon`, found by bisection ($\varepsilon$ falls as $\sigma$
#   grows) to a relative accuracy of $10^{-4}$ in $\sigma$. The result must itself satisfy the target.

# %% [markdown]
# ```otter
# # BEGIN SOLUTION
# ```

# %%
def epsilon_after(q, sigma, steps, delta):
    # BEGIN SOLUTION
    acc = RDPAccountant()
    acc.history = [(sigma, q, steps)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return float(acc.get_epsilon(delta))
    # END SOLUTION


def sigma_for(target_epsilon, q, steps, delta):
    # BEGIN SOLUTION
    lo, hi = 0.0, 1.0
    while epsilon_after(q, hi, steps, delta) > target_epsilon:
        lo, hi = hi, 2 * hi
    while hi - lo > 1e-4 * hi:
        mid = (lo + hi) / 2
        if epsilon_after(q, mid, steps, delta) > target_epsilon:
            lo = mid
        else:
            hi = mid
    return hi
    # END SOLUTION

# %% [markdown]
# ```otter
# # END SOLUTION
# ```

# %% [markdown]
# ```otter
# # BEGIN TESTS
# ```

# %%
_e1 = epsilon_after(0.01, 1.0, 1000, 1e-5)
assert 1.9 < _e1 < 2.3, f"epsilon after 1000 steps at q = 0.01, sigma = 1, delta = 1e-5 should be about 2.1, got {_e1}"
assert epsilon_after(0.01, 1.0, 2000, 1e-5) > _e1, "more steps must spend more epsilon"

# %%
_s = sigma_for(2.0, 0.01, 1000, 1e-5)
assert 1.0 < _s < 1.1, f"sigma for epsilon = 2 at q = 0.01, 1000 steps, delta = 1e-5 should be about 1.03, got {_s}"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
from privkit.privacy.accounting import epsilon_spent

for _q, _sg, _T, _d in [(0.016, 1.3, 1560, 4e-5), (0.05, 0.8, 300, 1e-5), (0.002, 2.5, 12000, 1e-6),
                        (0.1, 5.0, 50, 1e-5)]:
    _ours = epsilon_after(_q, _sg, _T, _d)
    _ref = epsilon_spent(noise_multiplier=_sg, sample_rate=_q, steps=_T, delta=_d, accountant="rdp")
    assert abs(_ours - _ref) <= 1e-6 * _ref + 1e-9, f"epsilon_after({_q}, {_sg}, {_T}, {_d}) = {_ours}, expected {_ref}"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
from privkit.privacy.accounting import epsilon_spent, noise_multiplier_for

for _eps, _q, _T, _d in [(0.8, 0.016, 1560, 4e-5), (0.2, 0.016, 1560, 4e-5), (4.0, 0.05, 400, 1e-5)]:
    _s = sigma_for(_eps, _q, _T, _d)
    _at = epsilon_spent(noise_multiplier=_s, sample_rate=_q, steps=_T, delta=_d, accountant="rdp")
    _ref = noise_multiplier_for(target_epsilon=_eps, sample_rate=_q, steps=_T, delta=_d, accountant="rdp")
    assert _at <= _eps * (1 + 1e-9), f"sigma_for({_eps}, {_q}, {_T}, {_d}) = {_s} spends epsilon {_at} > target"
    assert _at >= _eps - 0.02 and _s <= _ref * (1 + 1e-3), \
        f"sigma_for({_eps}, {_q}, {_T}, {_d}) = {_s} is too large (reference {_ref}): it wastes privacy budget"

# %% [markdown]
# ```otter
# # END TESTS
# ```

# %% [markdown]
# ```otter
# # END QUESTION
# ```

# %% [markdown]
# ```otter
# # BEGIN QUESTION
# name: q4
# points: 3
# ```

# %% [markdown]
# ## Q4. Projected DP-SGD: a public gradient subspace
#
# The DP-SGD noise $\mathcal N(0, \sigma^2 C^2 I_d)$ is spread over all $d$ parameters, so its squared norm grows
# like $d$, while the useful part of the gradients lives close to a low-dimensional subspace. Projected DP-SGD
# estimates that subspace from $m$ per-sample gradients of a **public** data set, stacked as the rows of
# $G \in \mathbb R^{m \times d}$, and replaces the noisy gradient $\tilde g$ by its projection $V_k V_k^\top \tilde g$.
# The noise kept has squared norm of order $k$ instead of $d$. The projection is computed from public data
# only and applied *after* the noise, so it is post-processing: the privacy guarantee does not change.
#
# $V_k \in \mathbb R^{d \times k}$ holds the top-$k$ eigenvectors of the gradients' second moment
# $G^\top G / m$ (not their covariance: the average gradient direction is the most useful one and must not be
# subtracted). These are the top-$k$ right singular vectors of $G$: with `U, S, Vh = torch.linalg.svd(G,
# full_matrices=False)` they are the first $k$ rows of `Vh`. (For a real network, $d$ is in the millions and
# privkit takes the $m \times m$ Gram matrix $GG^\top$ instead; the result is the same.) Write
#
# * `public_subspace(public_grads, k)`: the $d \times k$ matrix $V_k$ with orthonormal columns, for
#   `public_grads` of shape `[m, d]`;
# * `project(g, basis)`: $V_k V_k^\top g$ for a vector `g` of shape `[d]` (never form the $d \times d$ matrix).

# %% [markdown]
# ```otter
# # BEGIN SOLUTION
# ```

# %%
def public_subspace(public_grads, k):
    # BEGIN SOLUTION
    _, _, vh = torch.linalg.svd(public_grads, full_matrices=False)
    return vh[:k].T.contiguous()
    # END SOLUTION


def project(g, basis):
    # BEGIN SOLUTION
    return basis @ (basis.T @ g)
    # END SOLUTION

# %% [markdown]
# ```otter
# # END SOLUTION
# ```

# %% [markdown]
# ```otter
# # BEGIN TESTS
# ```

# %%
_gen = torch.Generator().manual_seed(30)
_G = torch.randn(20, 50, generator=_gen, dtype=torch.float64)
_V = public_subspace(_G, 4)
assert tuple(_V.shape) == (50, 4), f"the basis should have shape (d, k) = (50, 4), got {tuple(_V.shape)}"
assert torch.allclose(_V.T @ _V, torch.eye(4, dtype=_V.dtype), atol=1e-8), "the basis columns must be orthonormal"

# %%
_gen = torch.Generator().manual_seed(33)
_v = torch.randn(50, generator=_gen, dtype=torch.float64)
_Q, _ = torch.linalg.qr(torch.randn(50, 4, generator=_gen, dtype=torch.float64))
_pv = project(_v, _Q)
assert tuple(_pv.shape) == (50,), "project returns a vector of the same shape as g"
assert torch.allclose(project(_pv, _Q), _pv, atol=1e-10), "projecting twice must change nothing"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
# Against privkit's reference: gradients with a strong mean direction, a low-rank part and noise.
import torch
from privkit.dppose.subspace import public_subspace as _ref_sub

_gen = torch.Generator().manual_seed(31)
_d, _m = 300, 40
_mean = 3.0 * torch.randn(_d, generator=_gen, dtype=torch.float64) / _d ** 0.5
_low = torch.randn(_m, 6, generator=_gen, dtype=torch.float64) * torch.tensor([2.0, 1.6, 1.3, 1.0, 0.8, 0.6],
                                                                            dtype=torch.float64)
_dirs = torch.linalg.qr(torch.randn(_d, 6, generator=_gen, dtype=torch.float64))[0]
_G = _mean + _low @ _dirs.T + 0.05 * torch.randn(_m, _d, generator=_gen, dtype=torch.float64)
for _k in (1, 3, 5):
    _V = public_subspace(_G.clone(), _k)
    _R = _ref_sub(_G, k=_k).basis
    assert tuple(_V.shape) == (_d, _k), f"k = {_k}: the basis should have shape ({_d}, {_k})"
    assert torch.allclose(_V.T @ _V, torch.eye(_k, dtype=torch.float64), atol=1e-8), \
        f"k = {_k}: the basis columns must be orthonormal"
    assert torch.allclose(_V @ _V.T, _R @ _R.T, atol=1e-7), \
        f"k = {_k}: the subspace is not the top-k eigenspace of the gradients' second moment"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
# project() alone, on a basis built here, against privkit's reference projection.
import torch
from privkit.dppose.subspace import public_subspace as _ref_sub

_gen = torch.Generator().manual_seed(32)
_S = _ref_sub(torch.randn(12, 80, generator=_gen, dtype=torch.float64), k=5)
for _ in range(3):
    _v = torch.randn(80, generator=_gen, dtype=torch.float64)
    _pv = project(_v, _S.basis.clone())
    assert tuple(_pv.shape) == (80,), "project returns a vector of the same shape as g"
    assert torch.allclose(_pv, _S.project(_v), atol=1e-10), "project(g, basis) must be basis @ (basis.T @ g)"
    assert torch.allclose(_S.basis.T @ (_v - _pv), torch.zeros(5, dtype=torch.float64), atol=1e-10), \
        "the residual g - project(g) must be orthogonal to the subspace"

# %% [markdown]
# ```otter
# # END TESTS
# ```

# %% [markdown]
# ```otter
# # END QUESTION
# ```

# %% [markdown]
# ## Putting it together
#
# The cell below uses your four functions on the stand-in head at its initial weights: a Poisson batch at rate
# $q = 50/2000$, $C = 1$, $\sigma$ from `sigma_for` for $\varepsilon = 1$ at $\delta = 10^{-5}$ over 200 steps,
# and a rank-8 subspace of the 64 public per-sample gradients. It compares the noisy DP-SGD gradient and its
# projection with the clean clipped gradient (the same batch without noise), by cosine similarity. Even with only
# $d = 348$ parameters the projection removes most of the noise while keeping most of the signal; for a real
# pose network ($d$ in the millions) the gain is far larger, which is what the paper exploits.

# %%
try:
    _sigma = sigma_for(1.0, 50 / 2000, 200, 1e-5)
    print(f"noise multiplier for epsilon = 1 after 200 steps at q = 0.025: {_sigma:.3f}")
    _model = make_head(seed=0)
    _names = [n for n, _ in _model.named_parameters()]
    _pub = per_sample_grads(_model, x_public, y_public, simcc_loss)
    _basis = public_subspace(torch.cat([_pub[n].reshape(len(x_public), -1) for n in _names], 1), 8)
    _g_sample, _g_noise = torch.Generator().manual_seed(0), torch.Generator().manual_seed(1)
    for _draw in range(3):
        _idx = (torch.rand(len(x_private), generator=_g_sample) < 50 / 2000).nonzero().squeeze(1)
        _ps = per_sample_grads(_model, x_private[_idx], y_private[_idx], simcc_loss)
        _clean = torch.cat([t.reshape(-1) for t in clip_and_noise(_ps, 1.0, 0.0, 50, _g_noise).values()])
        _noisy = torch.cat([t.reshape(-1) for t in clip_and_noise(_ps, 1.0, _sigma, 50, _g_noise).values()])
        _proj = project(_noisy, _basis)
        print(f"batch of {len(_idx)}: cosine with the clean gradient, DP-SGD "
              f"{F.cosine_similarity(_noisy, _clean, 0).item():.2f}, projected "
              f"{F.cosine_similarity(_proj, _clean, 0).item():.2f}")
except Exception as exc:
    print("not yet:", exc)
