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
#     title: "SynthesisNet: publishing faces with metric privacy on an identity latent"
#     forbidden_imports: [privkit.synthesisnet, privkit.privacy, privkit.studies]
# ---

# %% [markdown]
# ```otter
# # ASSIGNMENT CONFIG
# name: synthesisnet
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
# # Assignment: SynthesisNet, publishing faces with metric privacy on an identity latent
#
# SynthesisNet publishes face images in three steps. An autoencoder splits each face into two codes: an
# **identity latent** $z_{id}$ (who the person is) and an **attribute latent** $z_{att}$ (pose, expression,
# lighting and so on). Noise is then added to the identity latent only. Finally a generator turns the noisy
# identity latent and the unchanged attribute latent back into a new face, and that face is published.
#
# The noise gives **metric differential privacy** (also called $d_X$-privacy or geo-indistinguishability).
# A mechanism $K$ is $\varepsilon\cdot d$-private if, for any two inputs $x_1, x_2$ and any set $S$ of outputs,
#
# $$\Pr[K(x_1) \in S] \le e^{\varepsilon\, d(x_1, x_2)}\, \Pr[K(x_2) \in S].$$
#
# Inputs that are close (two people who look alike) are hard to tell apart. Inputs that are far apart are
# protected less. SynthesisNet uses the Euclidean distance between identity latents. Two things are worth
# knowing from the start:
#
# * only the identity latent is protected: the attribute latent is published exactly as it is, and no
#   guarantee covers what it reveals;
# * the metric statement turns into an ordinary per-face guarantee only after each latent has been
#   **clipped** to a fixed norm $R$, because clipping puts a bound on how far apart two latents can be.
#
# In this assignment you write the noise sampler (Q1), the clip-and-noise release (Q2), the guarantee it
# buys (Q3) and the identity distance used to measure how much the published face moves away from the
# original (Q4). You need no neural network here. We use synthetic latents and measure identity distance as
# the cosine distance between latents. The real study decodes the published latents into images and
# measures identity distance with face recognisers applied to those images.
#
# **Rules.** Write your answers in the cells that contain `...`. Run `grader.check("qN")` after each
# question to run its visible tests; hidden tests run when your notebook is graded. You may use `math`,
# `numpy`, `scipy` and `torch`, but not `privkit.synthesisnet`, `privkit.privacy` or `privkit.studies` (they
# contain the answers): a submission that imports any of them gets no marks. Every random function takes a
# `generator` (a `torch.Generator`) and must draw **all** its randomness from it, for example
# `torch.rand(..., generator=generator)` and `torch.randn(..., generator=generator)`.

# %%
import math

import numpy as np
import torch

# %% [markdown]
# ```otter
# # BEGIN QUESTION
# name: q1
# points: 3
# ```

# %% [markdown]
# ## Q1. Laplace noise with a Euclidean norm, in $d$ dimensions
#
# The noise that gives $\varepsilon\cdot d_2$-privacy on $\mathbb R^d$ has density
#
# $$p(x) \propto e^{-\varepsilon \|x\|_2}.$$
#
# The density depends on $x$ only through its norm, so it can be sampled in polar coordinates. Take a
# **direction** $u$ uniform on the unit sphere, which you get by normalising a standard Gaussian vector. Take
# a **radius** $r$ whose density is proportional to $r^{d-1} e^{-\varepsilon r}$, where $r^{d-1}$ is the
# area of the sphere of radius $r$. That is the law $\mathrm{Gamma}(\text{shape } d,\ \text{scale }
# 1/\varepsilon)$. The noise is $x = r\,u$. This is *not* the same as drawing $d$ independent
# one-dimensional Laplace coordinates: that would use the $\ell_1$ norm and give a different radius law.
#
# Every released record needs its **own** independent draw. If one noise vector is shared by a batch, then
# the differences between released rows carry no noise at all.
#
# Write `metric_laplace(n, d, epsilon, generator)`. It returns an `(n, d)` float64 tensor whose rows are
# independent draws from the density above, and it takes all its randomness from `generator`.
#
# Hint: `torch` has no Gamma sampler that accepts a generator. For an integer shape $d$,
# $\mathrm{Gamma}(d, 1/\varepsilon)$ is the sum of $d$ independent exponentials with mean $1/\varepsilon$, and
# $-\log(1-U)/\varepsilon$ with $U$ uniform on $[0, 1)$ is one such exponential.

# %% [markdown]
# ```otter
# # BEGIN SOLUTION
# ```

# %%
def metric_laplace(n, d, epsilon, generator):
    # BEGIN SOLUTION
    uniforms = torch.rand((n, d), generator=generator, dtype=torch.float64)
    radius = -torch.log1p(-uniforms).sum(dim=1) / epsilon
    direction = torch.randn((n, d), generator=generator, dtype=torch.float64)
    direction = direction / torch.linalg.vector_norm(direction, dim=1, keepdim=True)
    return radius[:, None] * direction
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
_x = metric_laplace(7, 3, 1.0, torch.Generator().manual_seed(0))
assert tuple(_x.shape) == (7, 3), f"metric_laplace(7, 3, ...) should have shape (7, 3), got {tuple(_x.shape)}"
_y = metric_laplace(7, 3, 1.0, torch.Generator().manual_seed(0))
assert torch.equal(_x, _y), "two calls with identically seeded generators should give the same noise"
_z = metric_laplace(7, 3, 1.0, torch.Generator().manual_seed(1))
assert not torch.equal(_x, _z), "two different seeds should give different noise"

# %%
_x = metric_laplace(2000, 4, 2.0, torch.Generator().manual_seed(3)).double()
_mean_norm = float(torch.linalg.vector_norm(_x, dim=1).mean())
assert abs(_mean_norm - 2.0) < 0.15, f"the mean row norm should be close to d / epsilon = 2, got {_mean_norm:.3f}"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
from scipy.stats import gamma as _gamma, kstest as _kstest
for _d, _eps, _seed in [(8, 0.5, 11), (3, 4.0, 12), (16, 0.1, 13)]:
    _x = metric_laplace(4000, _d, _eps, torch.Generator().manual_seed(_seed)).double()
    assert tuple(_x.shape) == (4000, _d), f"wrong shape {tuple(_x.shape)}"
    _r = torch.linalg.vector_norm(_x, dim=1).numpy()
    _p = _kstest(_r, _gamma(a=_d, scale=1.0 / _eps).cdf).pvalue
    assert _p > 1e-4, f"row norms do not follow Gamma({_d}, 1/{_eps}) (KS p = {_p:.2e})"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
from scipy.stats import beta as _beta, kstest as _kstest
_d, _n = 5, 4000
_x = metric_laplace(_n, _d, 1.0, torch.Generator().manual_seed(21)).double()
_u = _x / torch.linalg.vector_norm(_x, dim=1, keepdim=True)
# on the uniform sphere, (u_1 + 1) / 2 follows Beta((d - 1) / 2, (d - 1) / 2)
_p = _kstest(((_u[:, 0] + 1) / 2).numpy(), _beta((_d - 1) / 2, (_d - 1) / 2).cdf).pvalue
assert _p > 1e-4, f"directions are not uniform on the sphere (KS of a coordinate, p = {_p:.2e})"
assert float(_u.mean(dim=0).abs().max()) < 0.03, "the mean direction should be close to 0"
_second = (_u.T @ _u) / _n
assert float((_second - torch.eye(_d, dtype=torch.float64) / _d).abs().max()) < 0.02, \
    "the second moment of the directions should be close to I / d"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
_d, _n = 6, 4000
_x = metric_laplace(_n, _d, 0.5, torch.Generator().manual_seed(31)).double()
_r = torch.linalg.vector_norm(_x, dim=1)
assert torch.unique(_r).numel() == _n, "rows should be independent draws, but some rows have equal norms"
_u = _x / _r[:, None]
_lag_dot = float((_u[1:] * _u[:-1]).sum(dim=1).mean())
assert abs(_lag_dot) < 0.04, f"consecutive rows' directions are correlated (mean cosine {_lag_dot:.3f})"
_rc = float(np.corrcoef(_r[1:].numpy(), _r[:-1].numpy())[0, 1])
assert abs(_rc) < 0.07, f"consecutive rows' norms are correlated (correlation {_rc:.3f})"

# %% [markdown]
# ```otter
# # END TESTS
# ```

# %% [markdown]
# ```otter
# # END QUESTION
# ```

# %% [markdown]
# The noise grows with the dimension. In $d$ dimensions its mean radius is $d/\varepsilon$, not $1/\varepsilon$:

# %%
try:
    for _d in (1, 16, 64):
        _noise = metric_laplace(2000, _d, 0.5, torch.Generator().manual_seed(0))
        print(f"d = {_d:3d}: mean noise radius {float(torch.linalg.vector_norm(_noise, dim=1).mean()):7.2f}"
              f"  (d / epsilon = {_d / 0.5:g})")
except Exception as exc:
    print("not yet:", exc)

# %% [markdown]
# ```otter
# # BEGIN QUESTION
# name: q2
# points: 3
# ```

# %% [markdown]
# ## Q2. Clip, then add noise
#
# By itself, metric privacy only says that *nearby* latents are hard to tell apart. To get a bound that
# holds for every pair of faces, SynthesisNet first clips each identity latent to norm at most $R$:
#
# $$\bar z_i = z_i \cdot \min\!\left(1, \frac{R}{\|z_i\|_2}\right),$$
#
# and then publishes $\bar z_i + n_i$ with an independent draw $n_i$ from Q1's law for each row. The order
# matters. The guarantee is about the distance between the *clipped* inputs, so clipping has to come before
# the noise. Clipping after the noise would remove most of the noise instead of bounding the inputs. Each row
# is also clipped on its own: every face gets the same bound, whatever the rest of the batch contains.
#
# Write `privatize(z_id, epsilon, clip_norm, generator)`, which takes an `(n, d)` tensor and returns the
# `(n, d)` float64 tensor of published identity latents.
#
# Grading checks each question on its own, so **do not call `metric_laplace` from Q1** here. Write the
# sampler again inside this cell, for instance as a helper function with a different name defined in this
# same cell.

# %% [markdown]
# ```otter
# # BEGIN SOLUTION
# ```

# %%
def _identity_noise(n, d, epsilon, generator):
    # BEGIN SOLUTION
    uniforms = torch.rand((n, d), generator=generator, dtype=torch.float64)
    radius = -torch.log1p(-uniforms).sum(dim=1) / epsilon
    direction = torch.randn((n, d), generator=generator, dtype=torch.float64)
    direction = direction / torch.linalg.vector_norm(direction, dim=1, keepdim=True)
    return radius[:, None] * direction
    # END SOLUTION


def privatize(z_id, epsilon, clip_norm, generator):
    # BEGIN SOLUTION
    z = z_id.to(torch.float64)
    norms = torch.linalg.vector_norm(z, dim=1, keepdim=True)
    clipped = z * torch.clamp(clip_norm / norms.clamp_min(1e-300), max=1.0)
    return clipped + _identity_noise(z.shape[0], z.shape[1], epsilon, generator)
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
_z = torch.tensor([[3.0, 4.0], [0.3, 0.4]], dtype=torch.float64)
_out = privatize(_z, 1e9, 1.0, torch.Generator().manual_seed(0)).double()
assert tuple(_out.shape) == (2, 2), f"privatize should keep the shape (2, 2), got {tuple(_out.shape)}"
assert torch.allclose(_out[0], torch.tensor([0.6, 0.8], dtype=torch.float64), atol=1e-6), \
    f"with almost no noise (epsilon = 1e9) the row [3, 4] clipped to norm 1 should be [0.6, 0.8], got {_out[0]}"
assert torch.allclose(_out[1], _z[1], atol=1e-6), \
    f"a row already inside the clip ball should not be changed by clipping, got {_out[1]}"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
from privkit.synthesisnet.privatize import clip_rows as _clip_rows
_g = torch.Generator().manual_seed(41)
_z = torch.randn(200, 8, generator=_g, dtype=torch.float64)
_z = _z * (torch.rand(200, 1, generator=_g, dtype=torch.float64) * 6.0)  # norms from 0 to about 17
_out = privatize(_z, 1e9, 5.0, torch.Generator().manual_seed(42)).double()
_ref = _clip_rows(_z, 5.0)
_err = float((_out - _ref).abs().max())
assert _err < 1e-5, f"with almost no noise the output should be the row-wise clipped input (max error {_err:.2e})"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
from scipy.stats import gamma as _gamma, kstest as _kstest
from privkit.synthesisnet.privatize import clip_rows as _clip_rows
_g = torch.Generator().manual_seed(51)
_n, _d, _eps, _R = 4000, 6, 0.5, 2.0
_z = torch.randn(_n, _d, generator=_g, dtype=torch.float64)
_z = _z * (torch.rand(_n, 1, generator=_g, dtype=torch.float64) * 2.5)
_out = privatize(_z, _eps, _R, torch.Generator().manual_seed(52)).double()
_noise = _out - _clip_rows(_z, _R)
_r = torch.linalg.vector_norm(_noise, dim=1)
_p = _kstest(_r.numpy(), _gamma(a=_d, scale=1.0 / _eps).cdf).pvalue
assert _p > 1e-4, (f"output minus the clipped input should be metric-Laplace noise with radius ~ "
                   f"Gamma({_d}, 1/{_eps}), mean {_d / _eps}; KS p = {_p:.2e}, mean {float(_r.mean()):.2f}")
_u = _noise / _r[:, None]
_lag_dot = float((_u[1:] * _u[:-1]).sum(dim=1).mean())
assert abs(_lag_dot) < 0.04, f"the noise of consecutive rows is correlated (mean cosine {_lag_dot:.3f})"

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
# ## Q3. What the guarantee says
#
# Let $x$ and $x'$ be the clipped identity latents of two faces. For any published value $y$, the densities
# satisfy $p(y\mid x) / p(y\mid x') = e^{-\varepsilon\|y-x\|} / e^{-\varepsilon\|y-x'\|} \le
# e^{\varepsilon\|x-x'\|}$ by the triangle inequality. So:
#
# * for a given pair of faces, the likelihood ratio is at most $e^{\varepsilon\,\|\bar z_1 - \bar z_2\|_2}$;
# * for **any** two faces, clipped latents lie in the ball of radius $R$, which has **diameter** $2R$, so the
#   worst-case ratio is $e^{2\varepsilon R}$. This is an ordinary $(2\varepsilon R, 0)$-DP statement
#   between any two faces.
#
# The price of this guarantee is noise whose mean radius is $d/\varepsilon$ (the mean of
# $\mathrm{Gamma}(d, 1/\varepsilon)$).
#
# Write:
#
# * `pair_bound(z1, z2, epsilon, clip_norm)`: the ratio bound $e^{\varepsilon\|\bar z_1 - \bar z_2\|_2}$ for
#   two 1-D latent tensors `z1`, `z2`, each clipped to `clip_norm` first (returns a float);
# * `indistinguishability_bound(epsilon, clip_norm)`: the worst-case ratio between any two faces;
# * `epsilon_for_ratio(ratio, clip_norm)`: the $\varepsilon$ whose worst-case ratio equals `ratio`;
# * `expected_noise_radius(d, epsilon)`: the mean norm of one draw of Q1's noise.

# %% [markdown]
# ```otter
# # BEGIN SOLUTION
# ```

# %%
def pair_bound(z1, z2, epsilon, clip_norm):
    # BEGIN SOLUTION
    def clip(z):
        z = z.to(torch.float64)
        norm = float(torch.linalg.vector_norm(z))
        return z if norm <= clip_norm else z * (clip_norm / norm)
    return math.exp(epsilon * float(torch.linalg.vector_norm(clip(z1) - clip(z2))))
    # END SOLUTION


def indistinguishability_bound(epsilon, clip_norm):
    # BEGIN SOLUTION
    return math.exp(2.0 * epsilon * clip_norm)
    # END SOLUTION


def epsilon_for_ratio(ratio, clip_norm):
    # BEGIN SOLUTION
    return math.log(ratio) / (2.0 * clip_norm)
    # END SOLUTION


def expected_noise_radius(d, epsilon):
    # BEGIN SOLUTION
    return d / epsilon
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
_b = indistinguishability_bound(0.05, 4.0)
assert _b > 1.0, f"a likelihood-ratio bound should exceed 1, got {_b}"
assert abs(epsilon_for_ratio(_b, 4.0) - 0.05) < 1e-9, "epsilon_for_ratio should invert indistinguishability_bound"
assert abs(pair_bound(torch.zeros(3), torch.zeros(3), 1.0, 1.0) - 1.0) < 1e-12, \
    "two identical latents are perfectly indistinguishable (ratio 1)"
assert expected_noise_radius(4, 2.0) > 0, "a mean radius is positive"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
from privkit.synthesisnet.privatize import metric_guarantee as _metric_guarantee
for _eps, _R, _d in [(0.01, 160.0, 16), (0.1, 2.0, 8), (1.0, 3.0, 256), (0.3, 0.5, 1)]:
    _ref = _metric_guarantee(_eps, _R, _d).epsilon  # log of the worst-case ratio between any two faces
    _ours = indistinguishability_bound(_eps, _R)
    assert abs(math.log(_ours) - _ref) < 1e-9 * max(1.0, _ref), \
        f"indistinguishability_bound({_eps}, {_R}) = {_ours:.6g}, expected exp({_ref:g}) = {math.exp(_ref):.6g}"
    _back = epsilon_for_ratio(math.exp(_ref), _R)
    assert abs(_back - _eps) < 1e-9 * _eps, f"epsilon_for_ratio(exp({_ref:g}), {_R}) = {_back}, expected {_eps}"
assert abs(pair_bound(torch.tensor([10.0, 0.0]), torch.tensor([0.0, 0.5]), 0.2, 2.0)
           - math.exp(0.2 * math.sqrt(2.0 ** 2 + 0.5 ** 2))) < 1e-9, \
    "pair_bound must clip each latent (to norm 2 here) before measuring their distance"
assert abs(pair_bound(torch.tensor([3.0, 0.0]), torch.tensor([-5.0, 0.0]), 0.5, 1.0) - math.exp(1.0)) < 1e-9, \
    "two opposite latents outside the clip ball are 2R apart once clipped"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
from privkit.synthesisnet.privatize import noise_radius_mean as _noise_radius_mean
for _d, _eps in [(1, 1.0), (16, 0.1), (64, 2.0), (256, 0.01)]:
    _ours, _ref = expected_noise_radius(_d, _eps), _noise_radius_mean(_d, _eps)
    assert abs(_ours - _ref) < 1e-9 * _ref, f"expected_noise_radius({_d}, {_eps}) = {_ours}, expected {_ref}"

# %% [markdown]
# ```otter
# # END TESTS
# ```

# %% [markdown]
# ```otter
# # END QUESTION
# ```

# %% [markdown]
# The guarantee has to be read with care. Take a 16-dimensional identity latent on a sphere of radius
# $R = 160$ (privkit uses a latent radius of 10 per dimension). Over the paper's range of $\varepsilon$ (0.01 to
# 1), the worst-case bound between two arbitrary faces is weak: its logarithm $2\varepsilon R$ runs from 3.2 to
# 320. Metric privacy protects *similar-looking* people much more strongly than it protects two arbitrary
# faces.

# %%
try:
    for _eps in (0.01, 0.1, 1.0):
        _b = indistinguishability_bound(_eps, 160.0)
        print(f"epsilon = {_eps:5.2f}: worst-case ratio e^{math.log(_b):6.1f}, "
              f"noise radius {expected_noise_radius(16, _eps):7.1f} vs R = 160, "
              f"two faces 1 unit apart: ratio {pair_bound(torch.zeros(16), torch.eye(16)[0], _eps, 160.0):.3f}")
except Exception as exc:
    print("not yet:", exc)

# %% [markdown]
# ```otter
# # BEGIN QUESTION
# name: q4
# points: 2
# ```

# %% [markdown]
# ## Q4. The identity distance it buys
#
# The paper measures privacy by how far the published face moves from the original in a face recogniser's
# embedding space. It uses the **cosine distance** $1 - \cos(a, b)$: 0 for the same direction, 1 for
# orthogonal directions and 2 for opposite ones. A larger distance means a more private release. The cosine
# distance ignores vector lengths, as face-recognition embeddings do.
#
# Here the latents stand in for the embeddings. Write `identity_distance(z, z_pub)`: the **mean over rows**
# of $1 - \cos(z_i, z^{pub}_i)$ for two `(n, d)` tensors (row $i$ of `z_pub` is the release of row $i$ of `z`).
# It returns a float.

# %% [markdown]
# ```otter
# # BEGIN SOLUTION
# ```

# %%
def identity_distance(z, z_pub):
    # BEGIN SOLUTION
    a = z.to(torch.float64)
    b = z_pub.to(torch.float64)
    cos = (a * b).sum(dim=1) / (torch.linalg.vector_norm(a, dim=1) * torch.linalg.vector_norm(b, dim=1))
    return float((1.0 - cos).mean())
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
_a = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
assert abs(identity_distance(_a, _a)) < 1e-9, "a release equal to the original has identity distance 0"
assert abs(identity_distance(_a, -_a) - 2.0) < 1e-9, "opposite latents have identity distance 2"
assert abs(identity_distance(torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 3.0]])) - 1.0) < 1e-9, \
    "orthogonal latents have identity distance 1"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
from privkit.synthesisnet.metrics import identity_distance_from_embeddings as _id_ref
_g = torch.Generator().manual_seed(61)
_z = torch.randn(50, 16, generator=_g, dtype=torch.float64) * 7.0
_zp = _z + torch.randn(50, 16, generator=_g, dtype=torch.float64) * 9.0
_ref = _id_ref(_z, _zp, n_bootstrap=0).mean
_ours = identity_distance(_z, _zp)
assert abs(_ours - _ref) < 1e-9, f"identity_distance = {_ours:.6f}, expected {_ref:.6f}"
_ours_scaled = identity_distance(_z * 0.1, _zp * 25.0)
assert abs(_ours_scaled - _ref) < 1e-9, "the cosine distance must not depend on the rows' lengths"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
from privkit.synthesisnet.metrics import identity_distance_from_embeddings as _id_ref
from privkit.synthesisnet.privatize import privatize_latent as _privatize_latent
_d, _R = 16, 160.0
_z = torch.randn(300, _d, generator=torch.Generator().manual_seed(71), dtype=torch.float64)
_z = _z / torch.linalg.vector_norm(_z, dim=1, keepdim=True) * _R
_dists = []
for _k, _eps in enumerate((0.01, 0.1, 1.0)):
    _pub, _ = _privatize_latent(_z, epsilon=_eps, clip_norm=_R, generator=torch.Generator().manual_seed(72 + _k))
    _ours, _ref = identity_distance(_z, _pub), _id_ref(_z, _pub, n_bootstrap=0).mean
    assert abs(_ours - _ref) < 1e-9, f"at epsilon = {_eps}: identity_distance = {_ours:.6f}, expected {_ref:.6f}"
    _dists.append(_ours)
assert _dists[0] > _dists[1] > _dists[2], f"identity distance should fall as epsilon grows, got {_dists}"

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
# Below, 200 synthetic faces get a 16-dimensional identity latent on the sphere of radius $R = 160$ and an
# 8-dimensional attribute latent. We release them with your `privatize` across the paper's range of
# $\varepsilon$ and measure how far the published identity moves. Small $\varepsilon$ means more noise and a
# larger identity distance: at $\varepsilon = 0.01$ the noise radius is ten times $R$ and the published
# direction is close to random. Large $\varepsilon$ keeps the identity. The attribute latent is published
# unchanged, so its distance stays 0 at every $\varepsilon$. Anything it reveals about identity is not
# covered by the guarantee.

# %%
try:
    _g = torch.Generator().manual_seed(2024)
    _z_id = torch.randn(200, 16, generator=_g, dtype=torch.float64)
    _z_id = _z_id / torch.linalg.vector_norm(_z_id, dim=1, keepdim=True) * 160.0
    _z_att = torch.randn(200, 8, generator=_g, dtype=torch.float64)
    for _eps in (0.01, 0.03, 0.1, 0.3, 1.0):
        _pub = privatize(_z_id, _eps, 160.0, torch.Generator().manual_seed(7))
        print(f"epsilon = {_eps:4.2f}: identity distance {identity_distance(_z_id, _pub):.3f}, "
              f"attribute distance {abs(identity_distance(_z_att, _z_att.clone())):.3f}")
except Exception as exc:
    print("not yet:", exc)
