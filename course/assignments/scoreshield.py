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
#     title: "ScoreShield: differentially private similarity scores"
#     forbidden_imports: [privkit.scoreshield, privkit.studies]
# ---

# %% [markdown]
# ```otter
# # ASSIGNMENT CONFIG
# name: scoreshield
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
# # Assignment: ScoreShield, differentially private similarity scores
#
# A face-verification service keeps a private *gallery*: one embedding per enrolled person, each a unit
# vector produced by a fixed face encoder. The service never hands out the embeddings, only similarity
# scores: the cosine similarities between a query embedding and every gallery record, or, in a second
# setting, the whole matrix of cosine similarities between $n$ records (their Gram matrix). Scores still
# leak information about the records, so ScoreShield releases them through the Gaussian mechanism:
#
# 1. work out how far one record can move the released scores (the sensitivity $\Delta$), and add Gaussian
#    noise whose standard deviation $\sigma$ is calibrated to $\Delta$ and the privacy target
#    $(\varepsilon, \delta)$;
# 2. clean the noisy output up so that it looks like a valid set of scores again: clip single scores into
#    $[-1, 1]$, and project a noisy Gram matrix back onto the correlation matrices. This is
#    *post-processing*: it reads only the noisy output, so it costs no privacy;
# 3. fix the decisions made on the noisy scores: noise pushes impostor scores over the acceptance
#    threshold, so the threshold has to be moved to keep the promised false-match rate.
#
# You write one piece of each step. All data here are synthetic unit embeddings (random directions), which
# behave like the cosine scores of a real encoder as far as the noise is concerned; no face model is needed.
#
# **Rules.** Write your answers in the cells that contain `...`. Run `grader.check("qN")` after each
# question to run its visible tests; hidden tests run when your notebook is graded. You may use `math`,
# `numpy`, `scipy`, `torch` and `privkit.privacy` (in particular `gaussian_sigma`, imported below, which
# calibrates the Gaussian mechanism), but not `privkit.scoreshield` or `privkit.studies` (they contain the
# answers): a submission that imports either of them, or a submodule of one, gets no marks. Every random
# function takes a `torch.Generator` and must draw all of its randomness from it.

# %%
import math

import numpy as np
import torch
from scipy.stats import norm

from privkit.privacy import gaussian_sigma


def unit_rows(n, d, generator):
    """n random unit vectors in R^d (uniform on the sphere), one per row."""
    x = torch.randn(n, d, generator=generator, dtype=torch.float64)
    return x / torch.linalg.vector_norm(x, dim=1, keepdim=True)

# %% [markdown]
# ```otter
# # BEGIN QUESTION
# name: q1
# points: 3
# ```

# %% [markdown]
# ## Q1. Releasing a vector of scores
#
# The gallery is a matrix $E$ with one unit embedding $e_i$ per row ($n \times d$), and the query is a public
# unit vector $q$. The clean scores are $s = E q$, so $s_i = e_i^\top q \in [-1, 1]$.
#
# **Sensitivity.** Two galleries are neighbours when one record is replaced by another unit vector,
# $e_i \to e_i'$. Only coordinate $i$ of $s$ changes, by $|(e_i - e_i')^\top q| \le \|e_i - e_i'\|_2 \le 2$
# (take $e_i' = -e_i$ and $q = e_i$ to reach 2). So the $\ell_2$ sensitivity of the whole score vector is
# $\Delta = 2$.
#
# **Release.** ScoreShield publishes
#
# $$\hat s = \operatorname{clip}_{[-1, 1]}\bigl(E q + w\bigr), \qquad w \sim \mathcal N(0, \sigma^2 I_n),$$
#
# with one independent noise draw per score. The noise is added to the clean scores first; clipping comes
# afterwards and only uses the noisy values, so it is post-processing. (The paper calibrates $\sigma$ with
# the classical rule $\sigma = \Delta\sqrt{2\ln(2/\delta)}/\varepsilon$, which is only proved for
# $\varepsilon < 1$; here use the exact *analytic* calibration, `gaussian_sigma(epsilon, delta,
# sensitivity=...)` from `privkit.privacy`.)
#
# Write
#
# * `score_sigma(epsilon, delta)`: the noise standard deviation for one released score vector (use
#   `gaussian_sigma` with the right sensitivity);
# * `release_scores(gallery, query, sigma, generator)`: the clipped noisy scores, a float64 tensor of
#   shape `(n,)`, for a gallery of shape `(n, d)` and a query of shape `(d,)`. Draw the noise with
#   `torch.randn(..., generator=generator, dtype=torch.float64)`.

# %% [markdown]
# ```otter
# # BEGIN SOLUTION
# ```

# %%
def score_sigma(epsilon, delta):
    # BEGIN SOLUTION
    return gaussian_sigma(epsilon, delta, sensitivity=2.0)
    # END SOLUTION


def release_scores(gallery, query, sigma, generator):
    # BEGIN SOLUTION
    clean = gallery.to(torch.float64) @ query.to(torch.float64)
    noise = sigma * torch.randn(clean.shape, generator=generator, dtype=torch.float64)
    return (clean + noise).clamp(-1.0, 1.0)
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
assert 0 < score_sigma(2.0, 1e-5) < score_sigma(1.0, 1e-5), "sigma must be positive and fall as epsilon grows"

# %%
_g = torch.Generator().manual_seed(0)
_E, _q = unit_rows(50, 8, _g), unit_rows(1, 8, _g)[0]
_a = torch.as_tensor(release_scores(_E, _q, 0.5, torch.Generator().manual_seed(1)), dtype=torch.float64)
_b = torch.as_tensor(release_scores(_E, _q, 0.5, torch.Generator().manual_seed(1)), dtype=torch.float64)
assert tuple(_a.shape) == (50,), f"expected shape (50,), got {tuple(_a.shape)}"
assert torch.equal(_a, _b), "the same seeded generator must give the same release"
assert float(_a.abs().max()) <= 1.0, "released scores must lie in [-1, 1]"
_c = torch.as_tensor(release_scores(_E, _q, 1e-6, torch.Generator().manual_seed(2)), dtype=torch.float64)
assert torch.allclose(_c, _E @ _q, atol=1e-4), "with tiny noise the release should equal the clean scores E q"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
from privkit.privacy import gaussian_sigma as _ref_sigma
for _eps, _dlt in [(0.5, 1e-5), (1.0, 1e-4), (20.0, 1e-4), (100.0, 1e-2)]:
    _ours, _ref = score_sigma(_eps, _dlt), _ref_sigma(_eps, _dlt, sensitivity=2.0)
    assert abs(_ours - _ref) <= 1e-9 * _ref, f"score_sigma({_eps}, {_dlt}) = {_ours}, expected {_ref}"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
from scipy.stats import kstest as _kstest
_g = torch.Generator().manual_seed(11)
_E, _q = unit_rows(5000, 64, _g), unit_rows(1, 64, _g)[0]   # clean scores ~ N(0, 1/64): no clipping
_sig = 0.1
_ = torch.manual_seed(123)
_out = release_scores(_E, _q, _sig, torch.Generator().manual_seed(5))
_ = torch.manual_seed(456)  # the global RNG must not matter
_out2 = release_scores(_E, _q, _sig, torch.Generator().manual_seed(5))
assert torch.equal(torch.as_tensor(_out), torch.as_tensor(_out2)), "all randomness must come from `generator`"
_z = ((torch.as_tensor(_out, dtype=torch.float64) - _E @ _q) / _sig).numpy()
_p = _kstest(_z, "norm").pvalue
assert _p > 1e-4, f"noise (release - E q)/sigma is not N(0, 1): KS p = {_p:.2e}, sample std {_z.std():.3f}"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
_g = torch.Generator().manual_seed(12)
_q = unit_rows(1, 16, _g)[0]
_E = torch.cat([_q.expand(2000, 16), (-_q).expand(2000, 16)])   # clean scores exactly +1 and -1
_out = torch.as_tensor(release_scores(_E, _q, 0.5, torch.Generator().manual_seed(6)), dtype=torch.float64)
assert float(_out.abs().max()) <= 1.0, f"released scores must lie in [-1, 1], got max |s| = {float(_out.abs().max())}"
_top = float((_out[:2000] == 1.0).double().mean())
_bot = float((_out[2000:] == -1.0).double().mean())
assert abs(_top - 0.5) < 0.06 and abs(_bot - 0.5) < 0.06, (
    f"a clean score of +1 (-1) should be clipped to +1 (-1) half of the time; got {_top:.3f} and {_bot:.3f}")

# %% [markdown]
# ```otter
# # END TESTS
# ```

# %% [markdown]
# ```otter
# # END QUESTION
# ```

# %% [markdown]
# How noisy is this? At the privacy levels the paper reports for face verification ($\delta = 10^{-4}$),
# the standard deviation per score is:

# %%
try:
    for _eps in (20, 35, 70, 100):
        print(f"epsilon = {_eps:>3}: sigma = {score_sigma(_eps, 1e-4):.3f}")
except Exception as exc:
    print("not yet:", exc)

# %% [markdown]
# Genuine and impostor cosines of a good face encoder are a few tenths apart, so at $\varepsilon = 20$
# ($\sigma \approx 0.54$) many decisions flip, while at $\varepsilon = 100$ ($\sigma \approx 0.18$) most
# survive.

# %% [markdown]
# ```otter
# # BEGIN QUESTION
# name: q2
# points: 2
# ```

# %% [markdown]
# ## Q2. Releasing a noisy Gram matrix
#
# In the second setting the service publishes all pairwise cosines of $n$ records, the Gram matrix
# $S = E E^\top$ (symmetric, unit diagonal). Replacing record $i$ changes row $i$ and column $i$: each of the
# $n - 1$ off-diagonal entries $S_{ij}$ moves by at most 2 and appears twice (as $S_{ij}$ and $S_{ji}$), while
# $S_{ii} = 1$ does not move. So
#
# $$\|S - S'\|_F^2 \le 2 (n - 1) \cdot 2^2 = 8 (n - 1), \qquad \Delta = 2\sqrt{2 (n - 1)}.$$
#
# The noise must keep the release symmetric, otherwise an entry would be published twice with two
# independent noise draws (and averaging them would halve the noise variance). ScoreShield draws a full
# matrix $W$ with i.i.d. $\mathcal N(0, \sigma^2)$ entries and adds its symmetric part:
#
# $$\tilde S = E E^\top + G, \qquad G = \tfrac12 (W + W^\top),$$
#
# so $G_{ii} \sim \mathcal N(0, \sigma^2)$ and, for $i \neq j$, $G_{ij} = G_{ji} \sim \mathcal N(0, \sigma^2/2)$.
#
# Write
#
# * `gram_sensitivity(n)`: the Frobenius sensitivity $\Delta$ of the $n \times n$ Gram matrix;
# * `noisy_gram(embeddings, sigma, generator)`: $\tilde S$ for unit embeddings of shape `(n, d)`, a float64
#   tensor of shape `(n, n)` that is symmetric (to rounding: $\tilde S_{ij} = \tilde S_{ji}$ within
#   $10^{-12}$). Draw $W$ with `torch.randn(..., generator=generator, dtype=torch.float64)`. Do not project or clip here.

# %% [markdown]
# ```otter
# # BEGIN SOLUTION
# ```

# %%
def gram_sensitivity(n):
    # BEGIN SOLUTION
    return 2.0 * math.sqrt(2.0 * (n - 1))
    # END SOLUTION


def noisy_gram(embeddings, sigma, generator):
    # BEGIN SOLUTION
    E = embeddings.to(torch.float64)
    n = E.shape[0]
    W = sigma * torch.randn((n, n), generator=generator, dtype=torch.float64)
    M = E @ E.T + 0.5 * (W + W.T)
    return 0.5 * (M + M.T)
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
_g = torch.Generator().manual_seed(0)
_E = unit_rows(20, 6, _g)
_M = torch.as_tensor(noisy_gram(_E, 0.3, torch.Generator().manual_seed(1)), dtype=torch.float64)
assert tuple(_M.shape) == (20, 20), f"expected shape (20, 20), got {tuple(_M.shape)}"
assert float((_M - _M.T).abs().max()) <= 1e-12, "the noisy Gram matrix must be symmetric"
assert gram_sensitivity(10) > 0, "the sensitivity must be positive"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
from privkit.scoreshield import record_sensitivity as _ref_sens
for _n in (2, 3, 10, 2048):
    _ours, _ref = gram_sensitivity(_n), _ref_sens(_n)
    assert abs(_ours - _ref) <= 1e-12 * _ref, f"gram_sensitivity({_n}) = {_ours}, expected {_ref}"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
from scipy.stats import kstest as _kstest
_g = torch.Generator().manual_seed(21)
_E = unit_rows(80, 16, _g)
_S = _E @ _E.T
_sig = 0.3
_iu = torch.triu_indices(80, 80, offset=1)
_off, _dia = [], []
_gen = torch.Generator().manual_seed(7)
for _ in range(20):
    _M = torch.as_tensor(noisy_gram(_E, _sig, _gen), dtype=torch.float64)
    assert float((_M - _M.T).abs().max()) <= 1e-12, "the noisy Gram matrix must be symmetric"
    _N = _M - _S
    _off.append(_N[_iu[0], _iu[1]])
    _dia.append(torch.diagonal(_N))
_off = torch.cat(_off).numpy() / (_sig / math.sqrt(2))
_dia = torch.cat(_dia).numpy() / _sig
_p_off, _p_dia = _kstest(_off, "norm").pvalue, _kstest(_dia, "norm").pvalue
assert _p_off > 1e-4, (f"off-diagonal noise should be N(0, sigma^2/2): KS p = {_p_off:.2e}, "
                       f"std ratio {_off.std():.3f} (expected 1)")
assert _p_dia > 1e-4, (f"diagonal noise should be N(0, sigma^2): KS p = {_p_dia:.2e}, "
                       f"std ratio {_dia.std():.3f} (expected 1)")

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
# points: 3
# ```

# %% [markdown]
# ## Q3. Projecting back onto the correlation matrices
#
# A Gram matrix of unit vectors is a *correlation matrix*: symmetric, positive semidefinite (PSD), with a
# unit diagonal (and therefore every entry in $[-1, 1]$). The noisy $\tilde S$ of Q2 is none of these
# except symmetric, and a downstream user expects a valid one. Mapping $\tilde S$ to a correlation matrix
# is post-processing, so any map will do for privacy; the closer it lands to the true $S$, the better.
#
# Two simple projections are the building blocks:
#
# * onto the PSD cone: with the eigendecomposition $Y = P \Lambda P^\top$, set
#   $\Pi_{+}(Y) = P \max(\Lambda, 0) P^\top$ (negative eigenvalues to zero);
# * onto the "box": $\Pi_{B}(Y)$ clips every entry into $[-1, 1]$ and then sets the diagonal to 1.
#
# Neither alone gives a correlation matrix. ScoreShield's *averaged alternating projections* (AAP) repeat,
# for a fixed number of sweeps, starting from $\hat S_0 = \tfrac12(\tilde S + \tilde S^\top)$,
#
# $$\hat S_{t+1} = \tfrac12\bigl(\Pi_{+}(\hat S_t) + \Pi_B(\hat S_t)\bigr),$$
#
# and finish with one PSD projection $X = \Pi_{+}(\hat S_T)$ followed by a diagonal rescale
# $X \leftarrow D^{-1/2} X D^{-1/2}$, $D = \operatorname{diag}(X)$, which makes the diagonal exactly 1 and
# keeps $X$ PSD. The result is always feasible; it is not exactly the *nearest* correlation matrix (that
# needs a more elaborate solver), but after a hundred sweeps it is within a fraction of a percent of it in
# Frobenius distance, much closer than the single PSD projection plus rescale.
#
# Write `project_to_correlation(S, iters=100)`: `S` is a symmetric float64 tensor `(n, n)`; run exactly
# `iters` AAP sweeps (no early stopping), then the final step, and return the float64 `(n, n)` result.
# Symmetrise $\Pi_+(Y)$ with $\tfrac12(X + X^\top)$ after each eigendecomposition (rounding), and use
# `torch.linalg.eigh`.

# %% [markdown]
# ```otter
# # BEGIN SOLUTION
# ```

# %%
def project_to_correlation(S, iters=100):
    # BEGIN SOLUTION
    def psd(Y):
        lam, P = torch.linalg.eigh(Y)
        X = (P * lam.clamp_min(0.0)) @ P.T
        return 0.5 * (X + X.T)

    def box(Y):
        Q = Y.clamp(-1.0, 1.0)
        Q.fill_diagonal_(1.0)
        return Q

    S_hat = S.to(torch.float64)
    S_hat = 0.5 * (S_hat + S_hat.T)
    for _ in range(iters):
        S_hat = 0.5 * (psd(S_hat) + box(S_hat))
        S_hat = 0.5 * (S_hat + S_hat.T)
    X = psd(S_hat)
    r = torch.diagonal(X).rsqrt()
    X = X * r[:, None] * r[None, :]
    X = 0.5 * (X + X.T)
    X.fill_diagonal_(1.0)
    return X
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
_A = torch.tensor([[1.3, 0.9, -0.2], [0.9, 0.8, 0.95], [-0.2, 0.95, 1.1]], dtype=torch.float64)
_X = torch.as_tensor(project_to_correlation(_A, iters=50), dtype=torch.float64)
assert tuple(_X.shape) == (3, 3), f"expected shape (3, 3), got {tuple(_X.shape)}"
assert float((_X - _X.T).abs().max()) <= 1e-10, "the result must be symmetric"
assert float((torch.diagonal(_X) - 1).abs().max()) <= 1e-10, f"the diagonal must be 1, got {torch.diagonal(_X)}"
assert float(torch.linalg.eigvalsh(_X).min()) >= -1e-8, "the result must be positive semidefinite"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
_g = torch.Generator().manual_seed(31)
for _n, _d, _sig in [(40, 5, 0.5), (30, 30, 0.2), (25, 3, 1.0)]:
    _E = unit_rows(_n, _d, _g)
    _W = _sig * torch.randn(_n, _n, generator=_g, dtype=torch.float64)
    _A = _E @ _E.T + 0.5 * (_W + _W.T)
    _X = torch.as_tensor(project_to_correlation(_A, iters=60), dtype=torch.float64)
    assert float((_X - _X.T).abs().max()) <= 1e-10, "the result must be symmetric"
    assert float((torch.diagonal(_X) - 1).abs().max()) <= 1e-10, "the diagonal must be exactly 1"
    assert float(_X.abs().max()) <= 1 + 1e-10, "every entry must lie in [-1, 1]"
    _lmin = float(torch.linalg.eigvalsh(_X).min())
    assert _lmin >= -1e-8, f"the result must be PSD, smallest eigenvalue {_lmin:.3g}"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
from privkit.scoreshield import nearest_correlation as _ncm
_g = torch.Generator().manual_seed(32)
for _n, _d, _sig, _it in [(40, 5, 0.5, 100), (30, 8, 1.0, 100), (12, 3, 0.3, 20)]:
    _E = unit_rows(_n, _d, _g)
    _W = _sig * torch.randn(_n, _n, generator=_g, dtype=torch.float64)
    _A = _E @ _E.T + 0.5 * (_W + _W.T)
    _X = torch.as_tensor(project_to_correlation(_A, iters=_it), dtype=torch.float64)
    _ref = _ncm(_A, method="aap", max_iter=_it, tol=1e-300, raise_on_max_iter=False)
    _gap = float(torch.linalg.matrix_norm(_X - _ref))
    assert _gap <= 1e-6, f"n={_n}, sigma={_sig}, iters={_it}: result is {_gap:.3g} (Frobenius) from the AAP reference"
    _near = _ncm(_A)
    _dx, _dn = float(torch.linalg.matrix_norm(_X - _A)), float(torch.linalg.matrix_norm(_near - _A))
    assert _dx <= 1.02 * _dn, f"the result is {_dx:.4f} from the input, the nearest correlation matrix {_dn:.4f}"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
_g = torch.Generator().manual_seed(33)
_E = unit_rows(15, 4, _g)
_C = _E @ _E.T
_C = 0.5 * (_C + _C.T)
_ = _C.fill_diagonal_(1.0)
_X = torch.as_tensor(project_to_correlation(_C, iters=30), dtype=torch.float64)
assert float((_X - _C).abs().max()) <= 1e-8, "a matrix that is already a correlation matrix must come back unchanged"

# %% [markdown]
# ```otter
# # END TESTS
# ```

# %% [markdown]
# ```otter
# # END QUESTION
# ```

# %% [markdown]
# Does the projection help? The correlation matrices form a convex set that contains the true $S$, and the
# exact nearest-point projection onto such a set can never move a matrix farther from $S$ (in Frobenius
# distance). AAP lands close to that projection, and the gain is large when the embeddings have few
# dimensions (the true $S$ then has low rank, while the noise spreads over all $n$ dimensions):

# %%
try:
    _g = torch.Generator().manual_seed(3)
    _E = unit_rows(60, 4, _g)
    _S = _E @ _E.T
    _W = 0.5 * torch.randn(60, 60, generator=_g, dtype=torch.float64)
    _A = _S + 0.5 * (_W + _W.T)
    _X = project_to_correlation(_A, iters=100)
    print(f"||noisy - S||_F = {float(torch.linalg.matrix_norm(_A - _S)):.2f}, "
          f"||projected - S||_F = {float(torch.linalg.matrix_norm(_X - _S)):.2f}")
except Exception as exc:
    print("not yet:", exc)

# %% [markdown]
# ```otter
# # BEGIN QUESTION
# name: q4
# points: 2
# ```

# %% [markdown]
# ## Q4. Recalibrating the verification threshold
#
# A verifier accepts a pair when its released score exceeds a threshold, $\hat s > \tau$. For $\tau$ inside
# $(-1, 1)$ clipping never changes that decision, so an impostor pair with clean score $s$ is accepted with
# probability $\Pr[s + w > \tau] = Q\bigl((\tau - s)/\sigma\bigr)$, with $Q = 1 - \Phi$ the Gaussian upper tail.
# Averaged over the clean impostor scores $s_1, \dots, s_N$, the false-match rate after noise is
#
# $$\mathrm{FMR}_\sigma(\tau) = \frac1N \sum_{k=1}^N Q\!\left(\frac{\tau - s_k}{\sigma}\right).$$
#
# Noise spreads the impostor scores out, so the clean threshold $\tau_\alpha$ that had false-match rate
# $\alpha$ now lets through more impostors: it has to move up. $\mathrm{FMR}_\sigma$ falls continuously as
# $\tau$ grows, but not to zero: as $\tau \to 1$ it tends to the floor $L(\sigma) = \mathrm{FMR}_\sigma(1)$,
# the share of impostor scores that noise pushes to the clip value $+1$. A target $\alpha < L(\sigma)$ cannot
# be met by any threshold below 1: the only option is $\tau = 1$, which accepts nobody (this is why the
# paper's tables print a true-accept rate of 0 at small $\varepsilon$).
#
# Write
#
# * `private_fmr(tau, impostor, sigma)`: $\mathrm{FMR}_\sigma(\tau)$ as a Python float, for a float threshold
#   and a float64 tensor `impostor` of clean impostor scores;
# * `recalibrated_threshold(impostor, sigma, alpha)`: the threshold $\tau \in (-1, 1)$ with
#   $\mathrm{FMR}_\sigma(\tau) = \alpha$, found by bisection to an accuracy of $10^{-9}$ or better; return
#   `1.0` when $\alpha < L(\sigma)$ (and `-1.0` when $\alpha > \mathrm{FMR}_\sigma(-1)$).
#
# Hint: `scipy.stats.norm.sf` or `torch.special.ndtr(-x)` computes $Q(x)$.

# %% [markdown]
# ```otter
# # BEGIN SOLUTION
# ```

# %%
def private_fmr(tau, impostor, sigma):
    # BEGIN SOLUTION
    s = torch.as_tensor(impostor, dtype=torch.float64)
    return float(torch.special.ndtr(-(tau - s) / sigma).mean())
    # END SOLUTION


def recalibrated_threshold(impostor, sigma, alpha):
    # BEGIN SOLUTION
    if alpha < private_fmr(1.0, impostor, sigma):
        return 1.0
    if alpha > private_fmr(-1.0, impostor, sigma):
        return -1.0
    lo, hi = -1.0, 1.0
    while hi - lo > 1e-12:
        mid = 0.5 * (lo + hi)
        if private_fmr(mid, impostor, sigma) > alpha:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
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
_g = torch.Generator().manual_seed(0)
_u, _v = unit_rows(4000, 25, _g), unit_rows(4000, 25, _g)
_imp = (_u * _v).sum(dim=1)          # impostor cosines, roughly N(0, 1/25)
_f = private_fmr(0.3, _imp, 1e-4)
assert abs(_f - float((_imp > 0.3).double().mean())) < 0.01, "with tiny noise the FMR is the clean fraction above tau"
_t = recalibrated_threshold(_imp, 0.2, 0.01)
assert -1 < _t < 1 and abs(private_fmr(_t, _imp, 0.2) - 0.01) < 1e-6, "the threshold must give FMR = alpha"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
from privkit.scoreshield import fmr_private as _ref_fmr
_g = torch.Generator().manual_seed(41)
_u, _v = unit_rows(20000, 25, _g), unit_rows(20000, 25, _g)
_imp = (_u * _v).sum(dim=1)
for _tau, _sig in [(0.0, 0.3), (0.4, 0.3), (0.6, 0.18), (0.9, 0.54), (-0.5, 0.1), (0.7, 1.5)]:
    _ours, _ref = float(private_fmr(_tau, _imp, _sig)), float(_ref_fmr(_tau, _imp, _sig))
    assert abs(_ours - _ref) <= 1e-12 + 1e-9 * _ref, f"private_fmr({_tau}, sigma={_sig}) = {_ours}, expected {_ref}"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
from privkit.scoreshield import recalibration_offset as _ref_recal
_g = torch.Generator().manual_seed(42)
_u, _v = unit_rows(20000, 25, _g), unit_rows(20000, 25, _g)
_imp = (_u * _v).sum(dim=1)
for _sig, _alpha in [(0.18, 1e-3), (0.23, 1e-2), (0.36, 1e-2), (0.1, 1e-3), (0.54, 0.05)]:
    _ref = _ref_recal(_imp, sigma=_sig, target_fpr=_alpha)
    assert _ref.attainable
    _ours = float(recalibrated_threshold(_imp, _sig, _alpha))
    assert abs(_ours - _ref.tau_private) <= 1e-6, (
        f"sigma={_sig}, alpha={_alpha}: threshold {_ours:.6f}, expected {_ref.tau_private:.6f} "
        f"(the clean threshold is {_ref.tau_clean:.6f})")
# unattainable: the floor L(sigma) is above alpha, so no threshold below 1 works
_ref = _ref_recal(_imp, sigma=1.0, target_fpr=1e-3)
assert not _ref.attainable
_ours = float(recalibrated_threshold(_imp, 1.0, 1e-3))
assert abs(_ours - 1.0) <= 1e-6, f"alpha below the floor L(sigma) = {_ref.floor:.3g}: expected 1.0, got {_ours}"

# %% [markdown]
# ```otter
# # END TESTS
# ```

# %% [markdown]
# ```otter
# # END QUESTION
# ```

# %% [markdown]
# What happens without recalibration? Keep the clean threshold for $\alpha = 10^{-3}$ and add the noise of
# a few privacy levels ($\delta = 10^{-4}$, $\Delta = 2$):

# %%
try:
    _g = torch.Generator().manual_seed(4)
    _u, _v = unit_rows(20000, 25, _g), unit_rows(20000, 25, _g)
    _imp = (_u * _v).sum(dim=1)
    _tau0 = float(torch.sort(_imp, descending=True).values[20])   # clean FMR = 1e-3
    for _eps in (100, 70, 35):
        _sig = gaussian_sigma(_eps, 1e-4, sensitivity=2.0)
        _tau = recalibrated_threshold(_imp, _sig, 1e-3)
        print(f"epsilon = {_eps:>3} (sigma = {_sig:.3f}): FMR at the clean threshold {_tau0:.3f} is "
              f"{private_fmr(_tau0, _imp, _sig):.4f}; recalibrated threshold {_tau:.3f}")
except Exception as exc:
    print("not yet:", exc)

# %% [markdown]
# At $\varepsilon = 35$ the floor $L(\sigma)$ is already above $10^{-3}$: no threshold below 1 keeps the
# false-match rate at the target, the verifier has to reject everybody, and the true-accept rate is 0. This
# is the collapse the paper's face-verification tables show at small $\varepsilon$.
