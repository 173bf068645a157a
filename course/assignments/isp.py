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
#     title: Identity leakage in image encoders and the Identity Sanitization Projection
#     forbidden_imports: [privkit.isp, privkit.metrics, privkit.studies, sklearn]
# ---

# %% [markdown]
# ```otter
# # ASSIGNMENT CONFIG
# name: isp
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
# # Assignment: identity leakage and the Identity Sanitization Projection
#
# General-purpose image encoders (CLIP, DINOv2, self-supervised copy-detection models) were never trained to
# recognise people, yet their embeddings still say who is in a picture. The paper behind this assignment
# measures that leak as a *verification* attack: score a pair of embeddings by their cosine similarity,
# accept the pair as "same person" above a threshold, and report the **true-accept rate (TAR)** on genuine
# pairs at a fixed, very low **false-accept rate (FAR)** on impostor pairs. Its fix is the **Identity
# Sanitization Projection (ISP)**: find the few directions along which the *average* embeddings of different
# people differ most, and project them out with one fixed matrix. Verification then falls towards chance,
# while attributes that have nothing to do with identity stay readable by a linear classifier.
#
# Real encoders and face datasets are far too heavy for a notebook, so this assignment uses **synthetic
# embeddings with a known structure** (built and seeded below): every person has a vector in a 6-dimensional
# identity subspace, every image carries one of three attribute values (think "lighting") in two other
# directions, all embeddings share a common offset (real encoders' embeddings have a large non-zero mean
# too), and isotropic noise is added before scaling each embedding to unit length. Because the structure is
# known, you can check that the projection removes what it should.
#
# You will write: the ISP projector (Q1), TAR at a FAR together with the smallest FAR the data can resolve
# (Q2), the genuine and impostor score sets of a labelled embedding set (Q3) and a ridge linear probe that
# measures the utility that survives (Q4).
#
# **Rules.** Write your answers in the cells that contain `...`. Run `grader.check("qN")` after each
# question to run its visible tests; hidden tests run when your notebook is graded. You may use `math`,
# `numpy`, `scipy` and `torch`, but not `privkit.isp`, `privkit.metrics`, `privkit.studies` or `sklearn`
# (they contain the answers): a submission that imports any of them, or a submodule of one, gets no marks.

# %%
import math

import numpy as np
import torch

# %% [markdown]
# ## The synthetic embeddings
#
# `synthetic_embeddings(n_identities, n_images, seed)` returns unit-norm float64 embeddings of dimension
# $d = 32$, the identity label of each row and its attribute (0, 1 or 2). The directions are fixed (the same
# for every call); the people, attributes and noise depend on `seed`. We build two disjoint groups of 40
# people with 8 images each: the projection is *fitted* on the first and *evaluated* on the second, as in the
# paper, where the attacker and the defender never see the test identities in advance.

# %%
D, ID_DIM = 32, 6
_Q = torch.linalg.qr(torch.randn(D, D, generator=torch.Generator().manual_seed(2026), dtype=torch.float64))[0]
OFFSET_DIR, ID_DIRS, ATTR_DIRS = _Q[:, 0], _Q[:, 1:1 + ID_DIM], _Q[:, 1 + ID_DIM:3 + ID_DIM]
ID_SCALES = torch.tensor([2.0, 1.7, 1.4, 1.2, 1.0, 0.8], dtype=torch.float64)
ATTR_CODES = torch.tensor([[1.0, 0.0], [-0.5, 0.866], [-0.5, -0.866]], dtype=torch.float64)


def synthetic_embeddings(n_identities, n_images, seed, *, noise=0.25, offset=2.0, attr_strength=0.8):
    """Unit-norm (n_identities * n_images, D) embeddings, identity labels and attribute labels."""
    g = torch.Generator().manual_seed(seed)
    people = torch.randn(n_identities, ID_DIM, generator=g, dtype=torch.float64) * ID_SCALES
    labels = torch.arange(n_identities).repeat_interleave(n_images)
    attr = torch.randint(0, 3, (labels.numel(),), generator=g)
    z = (offset * OFFSET_DIR + people[labels] @ ID_DIRS.T + attr_strength * ATTR_CODES[attr] @ ATTR_DIRS.T
         + noise * torch.randn(labels.numel(), D, generator=g, dtype=torch.float64))
    return z / z.norm(dim=1, keepdim=True), labels, attr


fit_z, fit_id, fit_attr = synthetic_embeddings(40, 8, seed=1)
test_z, test_id, test_attr = synthetic_embeddings(40, 8, seed=2)
print(fit_z.shape, "norm of the mean embedding:", round(float(fit_z.mean(0).norm()), 3))

# %% [markdown]
# ```otter
# # BEGIN QUESTION
# name: q1
# points: 3
# ```

# %% [markdown]
# ## Q1. The ISP projector
#
# Let $z_1, \dots, z_N \in \mathbb R^d$ be embeddings of $m$ people. The ISP is fitted in four steps:
#
# 1. average each person's embeddings into a class mean $\mu_c$;
# 2. subtract the **mean of the class means** $\bar\mu = \frac1m \sum_c \mu_c$ (the plain average of the $m$
#    class means, not the average over all $N$ embeddings; the two differ when people have different numbers of
#    images). Without this step the largest "direction" found would be the common offset that every embedding
#    shares, which says nothing about who is who;
# 3. stack the centred means as the columns of $M = [\mu_1 - \bar\mu, \dots, \mu_m - \bar\mu] \in \mathbb
#    R^{d \times m}$ and take its singular value decomposition $M = U S V^\top$; the leading $r$ left singular
#    vectors $U_r$ (largest singular values first) span the $r$ directions of greatest between-person spread;
# 4. the projector is $P = I - U_r U_r^\top$.
#
# $P$ is an orthogonal projector: symmetric, idempotent ($P^2 = P$), of rank $d - r$. Because the centred
# means sum to zero, $M$ has rank at most $m - 1$; when $r$ equals the rank of $M$, every class mean is mapped
# to the same point. A sanitised embedding is $Pz$ scaled back to unit length (you will do that in the
# demonstration, not in this function). $r$ is the privacy/utility dial.
#
# Write `isp_projector(embeddings, labels, rank)`: `embeddings` is an $(N, d)$ float tensor, `labels` an
# $(N,)$ integer tensor (arbitrary integer values, not necessarily $0..m-1$), `rank` the integer $r$. Return
# $P$ as a $(d, d)$ **float64** torch tensor. Work in float64.

# %% [markdown]
# ```otter
# # BEGIN SOLUTION
# ```

# %%
def isp_projector(embeddings, labels, rank):
    # BEGIN SOLUTION
    x = embeddings.double()
    classes, inv = torch.unique(labels, return_inverse=True)
    sums = torch.zeros(classes.numel(), x.shape[1], dtype=torch.float64).index_add_(0, inv, x)
    counts = torch.bincount(inv, minlength=classes.numel()).double()
    means = sums / counts[:, None]
    centred = (means - means.mean(0, keepdim=True)).T  # d x m
    u, _, _ = torch.linalg.svd(centred, full_matrices=False)
    u_r = u[:, :rank]
    return torch.eye(x.shape[1], dtype=torch.float64) - u_r @ u_r.T
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
_z, _y, _ = synthetic_embeddings(10, 4, seed=11)
_P = isp_projector(_z, _y, 3)
assert isinstance(_P, torch.Tensor) and _P.shape == (D, D), f"expected a ({D}, {D}) tensor, got {type(_P)}"
assert _P.dtype == torch.float64, f"return a float64 tensor, got {_P.dtype}"
assert torch.allclose(_P, _P.T, atol=1e-10), "P must be symmetric"
assert torch.allclose(_P @ _P, _P, atol=1e-6), "P must be idempotent (P @ P == P)"
assert abs(float(torch.trace(_P)) - (D - 3)) < 1e-6, f"P must have rank d - r = {D - 3}, its trace is {float(torch.trace(_P)):.4f}"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
# Five people with unequal image counts and a large common offset; r = 4 = rank of the centred means,
# so P must map every class mean to the same point.
_g = torch.Generator().manual_seed(7)
_d = 12
_means = torch.randn(5, _d, generator=_g, dtype=torch.float64) + 3.0 * torch.ones(_d, dtype=torch.float64)
_counts = [3, 5, 4, 7, 2]
_y = torch.cat([torch.full((c,), 10 * k + 3) for k, c in enumerate(_counts)])
_z = _means[torch.repeat_interleave(torch.arange(5), torch.tensor(_counts))] + 0.3 * torch.randn(
    sum(_counts), _d, generator=_g, dtype=torch.float64)
_z = _z / _z.norm(dim=1, keepdim=True)
_P = isp_projector(_z, _y, 4)
assert torch.allclose(_P, _P.T, atol=1e-10) and torch.allclose(_P @ _P, _P, atol=1e-6), "P must be a projector"
assert abs(float(torch.trace(_P)) - (_d - 4)) < 1e-6, "P must have rank d - r"
_mu = torch.stack([_z[_y == v].mean(0) for v in torch.unique(_y)])
_diff = (_mu[1:] - _mu[:1]) @ _P
assert float(_diff.abs().max()) < 1e-8, (
    f"with r = m - 1 the projected class means must coincide; largest difference {float(_diff.abs().max()):.3g}")

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
from privkit.isp.projection import IdentitySanitizer
_z, _y, _ = synthetic_embeddings(30, 6, seed=12)
_keep = torch.ones(_y.numel(), dtype=torch.bool)
_keep[::7] = False  # unequal numbers of images per person
_z, _y = _z[_keep], _y[_keep]
for _r in (1, 3, 6, 9):
    _ours = isp_projector(_z, _y, _r)
    _ref = IdentitySanitizer(rank=_r).update(_z, _y).projector.matrix()
    _err = float((_ours - _ref).abs().max())
    assert _err < 1e-8, f"isp_projector(rank={_r}) differs from the reference projector by {_err:.3g}"

# %% [markdown]
# ```otter
# # END TESTS
# ```

# %% [markdown]
# ```otter
# # END QUESTION
# ```

# %% [markdown]
# The singular values of the centred class-mean matrix show the dial: six of them stand well above the rest,
# one per direction of the identity subspace; the rest come from the noise that survives the averaging over
# eight images.

# %%
try:
    _P6 = isp_projector(fit_z, fit_id, 6)
    _mu = torch.stack([fit_z[fit_id == c].mean(0) for c in range(40)])
    _mc = _mu - _mu.mean(0)
    print("top singular values of M:", torch.linalg.svdvals(_mc.T)[:9].numpy().round(3))
    print("share of between-person spread left after r = 6:", round(float((_mc @ _P6).norm() ** 2 / _mc.norm() ** 2), 4))
except Exception as exc:
    print("not yet:", exc)

# %% [markdown]
# ```otter
# # BEGIN QUESTION
# name: q2
# points: 3
# ```

# %% [markdown]
# ## Q2. TAR at a FAR, and the smallest FAR the data can resolve
#
# A verifier accepts a pair when its score is **strictly greater** than a threshold $\tau$. Given $n$
# impostor scores and a target FAR $\alpha$, at most $K = \lfloor \alpha n \rfloor$ impostors may be accepted,
# so $\tau$ is the $(K+1)$-th largest impostor score (counting repeated values separately): the $K$ scores
# above it can pass, and it and everything equal to it cannot. The TAR is the fraction of genuine scores
# strictly greater than $\tau$. With ties at $\tau$ fewer than $K$ impostors may pass; that is intended
# (the realised FAR never exceeds $\alpha$).
#
# The paper reports TAR at FARs as low as $10^{-4}$ and below. Such a number is only meaningful if the
# threshold rests on more than one or two extreme impostor scores. The rule used here: a FAR is
# **resolvable** only when at least 10 false accepts are expected at it, so the smallest resolvable FAR for
# $n$ impostor pairs is $10 / n$ (infinite for $n = 0$). Below it, report `nan`, never a number.
#
# Write
#
# * `smallest_resolvable_far(n_impostor)`: $10 / n$ as a float (`math.inf` when $n = 0$);
# * `tar_at_far(genuine, impostor, far)`: `genuine` and `impostor` are 1-D float tensors, `far` a float in
#   $(0, 1)$. Return `math.nan` if `far` is below `smallest_resolvable_far(len(impostor))`, else the TAR as a
#   Python float.
#
# Hint: $\alpha n$ is computed in floating point; `math.floor(far * n * (1 + 1e-12))` protects against
# products such as $0.0001 \times 30000$ that land a hair below an integer. Compare `far` with the
# smallest resolvable FAR with the same kind of tolerance (`far < floor * (1 - 1e-12)` means unresolvable).

# %% [markdown]
# ```otter
# # BEGIN SOLUTION
# ```

# %%
def smallest_resolvable_far(n_impostor):
    # BEGIN SOLUTION
    return math.inf if n_impostor == 0 else 10 / n_impostor
    # END SOLUTION


def tar_at_far(genuine, impostor, far):
    # BEGIN SOLUTION
    n = impostor.numel()
    if far < smallest_resolvable_far(n) * (1 - 1e-12):
        return math.nan
    k = int(math.floor(far * n * (1 + 1e-12)))
    if k >= n:
        return math.nan
    tau = torch.sort(impostor.double(), descending=True).values[k]
    return float((genuine.double() > tau).double().mean())
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
assert smallest_resolvable_far(1000) == 0.01, f"10 / 1000 = 0.01, got {smallest_resolvable_far(1000)}"
_imp = torch.arange(1000, dtype=torch.float64) / 1000  # 0.000 ... 0.999
_gen = torch.tensor([0.5, 0.985, 0.995, 0.9995], dtype=torch.float64)
# FAR 0.01: K = 10, the 11th largest impostor score is 0.989, two genuine scores are above it
_t = tar_at_far(_gen, _imp, 0.01)
assert isinstance(_t, float) and abs(_t - 0.5) < 1e-12, f"tar_at_far at FAR 0.01 should be 0.5, got {_t}"
assert math.isnan(tar_at_far(_gen, _imp, 0.005)), "FAR 0.005 < 10/1000 is not resolvable: return nan"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
import privkit.metrics as _pm
for _n in (10, 999, 49920, 1_260_000):
    assert abs(smallest_resolvable_far(_n) - _pm.smallest_resolvable_far(_n)) < 1e-15, f"smallest_resolvable_far({_n})"
_g = torch.Generator().manual_seed(21)
for _n in (5000, 12345):
    _imp = torch.randn(_n, generator=_g, dtype=torch.float64)
    _gen = torch.randn(700, generator=_g, dtype=torch.float64) + 2.5
    _fars = [0.5, 0.1, 0.0123, 0.003, 10 / _n, 9 / _n, 1e-4]
    _ref = _pm.tar_at_far(_gen, _imp, fars=_fars)["tar"].tolist()
    for _f, _r in zip(_fars, _ref):
        _o = tar_at_far(_gen, _imp, _f)
        assert (math.isnan(_o) and math.isnan(_r)) or abs(_o - _r) < 1e-12, (
            f"n_impostor={_n}, far={_f:g}: got {_o}, expected {_r}")

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
# Scores rounded to a coarse grid, so many of them tie with the threshold.
import privkit.metrics as _pm
_g = torch.Generator().manual_seed(22)
_imp = torch.round(torch.randn(8000, generator=_g, dtype=torch.float64) * 10) / 20
_gen = torch.round((torch.randn(900, generator=_g, dtype=torch.float64) + 2.0) * 10) / 20
_fars = [0.2, 0.05, 0.01, 0.004, 0.002, 0.00125]
_ref = _pm.tar_at_far(_gen, _imp, fars=_fars)["tar"].tolist()
for _f, _r in zip(_fars, _ref):
    _o = tar_at_far(_gen, _imp, _f)
    assert (math.isnan(_o) and math.isnan(_r)) or abs(_o - _r) < 1e-12, (
        f"with tied scores, far={_f:g}: got {_o}, expected {_r} (accept only scores strictly above tau)")

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
# ## Q3. Genuine and impostor pairs
#
# Verification is scored over pairs of *distinct* images. Pair $(i, j)$ with $i < j$ is **genuine** when both
# images show the same person and an **impostor** pair otherwise; its score is the cosine similarity
# $\langle z_i, z_j \rangle / (\lVert z_i \rVert \lVert z_j \rVert)$. Each unordered pair counts once, and an
# image is never paired with itself (that pair would score exactly 1 and inflate the TAR). With $N$ images
# and $n_c$ images of person $c$ there are $\sum_c n_c (n_c - 1) / 2$ genuine pairs and
# $N(N-1)/2$ minus that many impostor pairs: the 320 test images here give 1,120 genuine and 49,920 impostor
# pairs, so the smallest resolvable FAR is about $2 \times 10^{-4}$. (The paper's test sets give about a
# million impostor pairs; resolving $10^{-6}$ would need ten million.)
#
# Write `pair_scores(embeddings, labels)` returning a tuple `(genuine, impostor)` of 1-D float64 tensors of
# cosine similarities over all pairs $i < j$ (in any order). The embeddings need not have unit norm.

# %% [markdown]
# ```otter
# # BEGIN SOLUTION
# ```

# %%
def pair_scores(embeddings, labels):
    # BEGIN SOLUTION
    x = embeddings.double()
    x = x / x.norm(dim=1, keepdim=True)
    n = x.shape[0]
    i, j = torch.triu_indices(n, n, offset=1)
    s = (x @ x.T)[i, j]
    same = labels[i] == labels[j]
    return s[same], s[~same]
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
_x = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 3.0], [1.0, 1.0]], dtype=torch.float64)
_gen, _imp = pair_scores(_x, torch.tensor([0, 0, 1, 1]))
assert _gen.numel() == 2 and _imp.numel() == 4, f"expected 2 genuine and 4 impostor pairs, got {_gen.numel()} and {_imp.numel()}"
assert torch.allclose(torch.sort(_gen).values, torch.tensor([2 ** -0.5, 1.0], dtype=torch.float64)), f"genuine scores {_gen}"
assert torch.allclose(torch.sort(_imp).values, torch.tensor([0.0, 0.0, 2 ** -0.5, 2 ** -0.5], dtype=torch.float64)), f"impostor scores {_imp}"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
_g = torch.Generator().manual_seed(31)
_y = torch.tensor([5, 5, 5, 2, 2, 9, 9, 9, 9, 1, 7, 7, 5])
_x = torch.randn(_y.numel(), 6, generator=_g, dtype=torch.float64) * 3 + 1
_gen, _imp = pair_scores(_x, _y)
_c = torch.bincount(_y)
_ng = int((_c * (_c - 1) // 2).sum())
_n = _y.numel()
assert _gen.numel() == _ng and _imp.numel() == _n * (_n - 1) // 2 - _ng, (
    f"expected {_ng} genuine and {_n * (_n - 1) // 2 - _ng} impostor pairs, got {_gen.numel()} and {_imp.numel()}")
_u = _x / _x.norm(dim=1, keepdim=True)
_S = _u @ _u.T
_eg = torch.sort(torch.stack([_S[a, b] for a in range(_n) for b in range(a + 1, _n) if _y[a] == _y[b]])).values
_ei = torch.sort(torch.stack([_S[a, b] for a in range(_n) for b in range(a + 1, _n) if _y[a] != _y[b]])).values
assert torch.allclose(torch.sort(_gen.double()).values, _eg, atol=1e-10), "genuine cosine scores differ"
assert torch.allclose(torch.sort(_imp.double()).values, _ei, atol=1e-10), "impostor cosine scores differ"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
import privkit.metrics as _pm
_z, _y, _ = synthetic_embeddings(12, 5, seed=32, noise=0.6)
_gen, _imp = pair_scores(_z, _y)
assert _gen.numel() == 12 * 10 and _imp.numel() == 60 * 59 // 2 - 120, (
    f"12 people x 5 images: expected 120 genuine and {60 * 59 // 2 - 120} impostor pairs, got {_gen.numel()} and {_imp.numel()}")
_ref = _pm.pair_auc(_z @ _z.T, _y)
assert abs(_pm.auc(_gen.double(), _imp.double()) - _ref) < 1e-12, "the AUC of your pairs differs from the reference"

# %% [markdown]
# ```otter
# # END TESTS
# ```

# %% [markdown]
# ```otter
# # END QUESTION
# ```

# %% [markdown]
# ## The leak, and what the projection does to it
#
# With Q1 to Q3 in place we can run the attack of the paper on the synthetic encoder: the defender fits $P$ on
# the first 40 people, the sanitised test embeddings are $Pz / \lVert Pz \rVert$, and the verifier scores test
# pairs by cosine. TAR at FAR $10^{-3}$ falls from about a third to a few times $10^{-3}$, close to chance (a
# verifier that ignores identity accepts genuine pairs as often as impostors, TAR $\approx$ FAR); removing only
# the three strongest directions ($r = 3$) helps far less. The TAR at $10^{-5}$ is `nan` because 49,920 impostor
# pairs cannot resolve it.

# %%
def sanitise(z, P):
    out = z @ P
    return out / out.norm(dim=1, keepdim=True)


try:
    for _r in (0, 3, 6):
        _zt = test_z if _r == 0 else sanitise(test_z, isp_projector(fit_z, fit_id, _r))
        _gen, _imp = pair_scores(_zt, test_id)
        print(f"r = {_r}: TAR@1e-3 = {tar_at_far(_gen, _imp, 1e-3):.4f}, TAR@1e-2 = {tar_at_far(_gen, _imp, 1e-2):.4f}, "
              f"TAR@1e-5 = {tar_at_far(_gen, _imp, 1e-5)}  (smallest resolvable FAR {smallest_resolvable_far(_imp.numel()):.2g})")
except Exception as exc:
    print("not yet:", exc)

# %% [markdown]
# ```otter
# # BEGIN QUESTION
# name: q4
# points: 2
# ```

# %% [markdown]
# ## Q4. The utility that survives: a ridge linear probe
#
# A projection that destroyed everything would also stop the leak, so the paper checks what remains: a linear
# classifier trained on the sanitised embeddings for a task that is not identity should do about as well as on
# the raw ones. Here the task is the three-valued attribute.
#
# The probe is least-squares (ridge) regression onto one-hot targets, **with an intercept**, trained on one set
# of embeddings and scored on a **different** set. With $C$ classes ($C$ = one more than the largest label in
# `train_y` or `test_y`), $X$ the training embeddings, $Y$ their one-hot targets ($N \times C$):
#
# 1. centre on the training means, $\bar x = \text{mean}(X)$, $\bar y = \text{mean}(Y)$, $X_c = X - \bar x$;
# 2. $W = (X_c^\top X_c + \lambda I)^{-1} X_c^\top (Y - \bar y)$ (centring fits the intercept without
#    penalising it);
# 3. a test embedding $x$ gets the scores $(x - \bar x) W + \bar y$ and is predicted as their argmax;
# 4. return the accuracy on the **test** set, a Python float.
#
# Write `probe_accuracy(train_x, train_y, test_x, test_y, lam=1e-3)`; labels are integer tensors with values
# $0..C-1$. Work in float64.

# %% [markdown]
# ```otter
# # BEGIN SOLUTION
# ```

# %%
def probe_accuracy(train_x, train_y, test_x, test_y, lam=1e-3):
    # BEGIN SOLUTION
    x = train_x.double()
    mu = x.mean(0)
    xc = x - mu
    c = int(max(int(train_y.max()), int(test_y.max()))) + 1
    y = torch.nn.functional.one_hot(train_y.long(), c).double()
    ybar = y.mean(0)
    w = torch.linalg.solve(xc.T @ xc + lam * torch.eye(x.shape[1], dtype=torch.float64), xc.T @ (y - ybar))
    pred = ((test_x.double() - mu) @ w + ybar).argmax(1)
    return float((pred == test_y.long()).double().mean())
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
_za, _ya, _aa = synthetic_embeddings(20, 8, seed=41)
_zb, _yb, _ab = synthetic_embeddings(20, 8, seed=42)
_acc = probe_accuracy(_za, _aa, _zb, _ab)
assert isinstance(_acc, float) and 0.0 <= _acc <= 1.0, f"return the accuracy as a float in [0, 1], got {_acc!r}"
assert _acc > 0.9, f"the attribute is linearly decodable; expected accuracy > 0.9, got {_acc}"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
def _ref_probe(tx, ty, sx, sy, lam):
    tx, sx = tx.double().numpy(), sx.double().numpy()
    c = int(max(int(ty.max()), int(sy.max()))) + 1
    y = np.eye(c)[ty.numpy()]
    mu, yb = tx.mean(0), y.mean(0)
    w = np.linalg.solve((tx - mu).T @ (tx - mu) + lam * np.eye(tx.shape[1]), (tx - mu).T @ (y - yb))
    return float(np.mean(((sx - mu) @ w + yb).argmax(1) == sy.numpy()))

# The class signal lies along the direction of a large common offset: a probe without an intercept
# cannot separate the classes.
_g = torch.Generator().manual_seed(43)
_v = torch.randn(8, generator=_g, dtype=torch.float64)
_v = _v / _v.norm()
def _offset_data(n):
    y = torch.randint(0, 2, (n,), generator=_g)
    a = 5.0 + 1.0 * y.double() + 0.25 * torch.randn(n, generator=_g, dtype=torch.float64)
    noise = torch.randn(n, 8, generator=_g, dtype=torch.float64)
    noise = noise - (noise @ _v)[:, None] * _v
    return a[:, None] * _v + noise, y
_tx, _ty = _offset_data(300)
_sx, _sy = _offset_data(400)
_acc, _ref = probe_accuracy(_tx, _ty, _sx, _sy, lam=1e-3), _ref_probe(_tx, _ty, _sx, _sy, 1e-3)
assert abs(_acc - _ref) <= 1.5 / 400, f"offset data: accuracy {_acc}, expected {_ref}"

# %%
""" # BEGIN TEST CONFIG
hidden: true
""" # END TEST CONFIG
def _ref_probe(tx, ty, sx, sy, lam):
    tx, sx = tx.double().numpy(), sx.double().numpy()
    c = int(max(int(ty.max()), int(sy.max()))) + 1
    y = np.eye(c)[ty.numpy()]
    mu, yb = tx.mean(0), y.mean(0)
    w = np.linalg.solve((tx - mu).T @ (tx - mu) + lam * np.eye(tx.shape[1]), (tx - mu).T @ (y - yb))
    return float(np.mean(((sx - mu) @ w + yb).argmax(1) == sy.numpy()))


# Random labels with as many dimensions as training points: a probe can fit the training set perfectly
# but cannot beat chance on new data.
_g = torch.Generator().manual_seed(44)
_tx = torch.randn(40, 40, generator=_g, dtype=torch.float64)
_ty = torch.randint(0, 2, (40,), generator=_g)
_sx = torch.randn(500, 40, generator=_g, dtype=torch.float64)
_sy = torch.randint(0, 2, (500,), generator=_g)
_acc, _ref = probe_accuracy(_tx, _ty, _sx, _sy, lam=1e-6), _ref_probe(_tx, _ty, _sx, _sy, 1e-6)
assert abs(_acc - _ref) <= 1.5 / 500, f"random labels: accuracy {_acc}, expected {_ref} (score the test set)"
_za, _ya, _aa = synthetic_embeddings(15, 6, seed=45, noise=0.5)
_zb, _yb, _ab = synthetic_embeddings(25, 6, seed=46, noise=0.5)
for _lam in (1e-3, 1.0, 30.0):
    _acc, _ref = probe_accuracy(_za, _aa, _zb, _ab, lam=_lam), _ref_probe(_za, _aa, _zb, _ab, _lam)
    assert abs(_acc - _ref) <= 1.5 / 150, f"lam={_lam}: accuracy {_acc}, expected {_ref}"

# %% [markdown]
# ```otter
# # END TESTS
# ```

# %% [markdown]
# ```otter
# # END QUESTION
# ```

# %% [markdown]
# ## Privacy against utility
#
# The attribute probe is trained on the fitting people and scored on the test people, before and after the
# projection. With $r = 6$ the attribute survives almost untouched while verification has collapsed. Push $r$
# further and the projection starts to eat the attribute too: with only eight images per person the class
# means still vary a little along the attribute directions, so they are the next "between-person" directions
# in line. The paper makes the same point: $r$ is a dial, and where to set it is a choice, not a given.

# %%
try:
    for _r in (0, 6, 8):
        if _r == 0:
            _a, _b = fit_z, test_z
        else:
            _P = isp_projector(fit_z, fit_id, _r)
            _a, _b = sanitise(fit_z, _P), sanitise(test_z, _P)
        _gen, _imp = pair_scores(_b, test_id)
        print(f"r = {_r}: attribute probe accuracy {probe_accuracy(_a, fit_attr, _b, test_attr):.3f}, "
              f"TAR@1e-3 {tar_at_far(_gen, _imp, 1e-3):.4f}")
except Exception as exc:
    print("not yet:", exc)
