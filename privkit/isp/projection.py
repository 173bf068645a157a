"""Identity Sanitization Projection (ISP) and its linear-erasure baselines (paper 1, docs/isp.md §2).

Every method here follows the fitter / frozen-object shape (docs/isp.md §2): a *fitter* accumulates streaming
float64 statistics with ``update(embeddings, identities)`` and hands out a frozen, picklable-free object that applies
the transform (``__call__``), moves between devices (``.to()``) and saves to safetensors with JSON metadata.

* :class:`IdentitySanitizer` → :class:`IdentityProjector` — ISP. Class means μ_i of unit-norm embeddings are
  centred on the *mean of the class means* μ_C, stacked into M = [μ_1 − μ_C, …, μ_m − μ_C] ∈ ℝ^{d×m}; the top-r left
  singular vectors U_r of M are removed, z̃ = (I − U_r U_rᵀ) z, and the result is re-normalised (as in the paper).
* :class:`LeaceFitter` → :class:`LeaceEraser` — LEACE-style whitened erasure (Belrose et al. 2023), implemented here
  from its closed form: with Σ the covariance of the embeddings, W = (Σ^{1/2})⁺ and Σ_XZ the cross-covariance with the
  one-hot identity, x ↦ x − W⁺ Q Qᵀ W (x − E[x]) where Q is an orthonormal basis of col(W Σ_XZ). Oblique, not
  orthogonal.
* :class:`INLPFitter` → :class:`IdentityProjector` — iterative nullspace projection (Ravfogel et al. 2020) with a
  ridge (least-squares) multi-class classifier, computed from the same sufficient statistics.
* :func:`principal_angles` — cosines of the principal angles between two fitted subspaces.

Where the paper is silent the choices below are **privkit's definitions** ([I] in docs/isp.md §2): the rank rules, the
numerical-rank tolerance, LEACE's optional rank truncation and INLP's per-iteration direction count.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Self

import torch

from .._validate import UNIT_NORM_TOL, check_choice, check_int, check_positive, check_probability, check_tensor
from ..errors import InsufficientDataError, InvalidArgumentError, NotUnitNormError, ShapeError
from ..linalg import RANK_RTOL, numerical_rank, top_singular_directions

__all__ = ["IdentitySanitizer", "IdentityProjector", "LeaceFitter", "LeaceEraser", "INLPFitter", "principal_angles",
           "RANK_RULES"]

#: Rank rules of :class:`IdentitySanitizer` when ``rank`` is None.
RANK_RULES: tuple[str, ...] = ("energy", "relative", "full")

_FORMAT_VERSION = 1


# ---------------------------------------------------------------------------------------------------------------------
# Streaming statistics shared by the fitters
# ---------------------------------------------------------------------------------------------------------------------
class _IdentityStats:
    """Float64 running per-identity sums and counts (and optionally the total sum and second moment).

    Accumulators live on the device of the first batch; later batches are moved there. Identity labels are arbitrary
    int64 values; a label seen again adds to its existing row. Per-class partial sums of a batch are formed with
    ``index_add_`` in the input's dtype over chunks of at most 32,768 rows and then added to the float64
    accumulators: float64 inputs give exact float64 sums; float32 inputs carry float32 rounding within a chunk
    (relative ~1e-7, the precision of the inputs themselves) and keep the fast float32 scatter.
    """

    #: rows per float32 partial sum (and float64 second-moment block) before promotion to float64
    _CHUNK = 32768

    def __init__(self, *, second_moment: bool, require_unit_norm: bool) -> None:
        self.second_moment = second_moment
        self.require_unit_norm = require_unit_norm
        self.dim: int | None = None
        self.device: torch.device | None = None
        self.labels: torch.Tensor | None = None  # (m,) int64, insertion order
        self._sorted_labels = self._sorted_rows = None  # labels sorted, and the row of each
        self.sums: torch.Tensor | None = None  # (m, d) float64
        self.counts: torch.Tensor | None = None  # (m,) float64
        self.total: torch.Tensor | None = None  # (d,) float64
        self.moment: torch.Tensor | None = None  # (d, d) float64, sum of x xᵀ
        self.n = 0

    def update(self, embeddings: torch.Tensor, identities: torch.Tensor) -> None:
        # Validation is fused with the accumulation (one pass over the batch): finiteness is read from the row
        # norms and the per-class partial sums, with the exact element-wise check only to word the error. Nothing
        # is committed to the accumulators before the whole batch has been validated.
        check_tensor("embeddings", embeddings, ndim=2, floating=True, finite=False)
        check_tensor("identities", identities, ndim=1)
        if identities.is_floating_point() or identities.dtype == torch.bool:
            raise InvalidArgumentError(f"identities must be an integer tensor, got dtype {identities.dtype}")
        n, d = embeddings.shape
        if identities.shape[0] != n:
            raise ShapeError(f"identities must have shape ({n},) to match embeddings, got {tuple(identities.shape)}")
        if d == 0:
            raise ShapeError("embeddings must have at least one column")
        if self.dim is not None and d != self.dim:
            raise ShapeError(f"embeddings must have {self.dim} columns like the earlier updates, got {d}")
        if n == 0:
            return
        device = embeddings.device if self.device is None else self.device
        x = embeddings.to(device)
        work = x if x.dtype in (torch.float32, torch.float64) else x.float()
        if self.require_unit_norm:
            norms = torch.linalg.vector_norm(work, dim=1)
            if not bool(torch.isfinite(norms).all()):
                check_tensor("embeddings", work, finite=True)  # raises for NaN/inf; else the norm overflowed
                norms = torch.linalg.vector_norm(work.double(), dim=1)
            worst = float((norms - 1).abs().max())
            if worst > UNIT_NORM_TOL:
                raise NotUnitNormError(
                    f"embeddings must have unit L2 norm along its last dimension (tolerance {UNIT_NORM_TOL:g}); "
                    f"the worst row is off by {worst:.3g}. Normalise with x / x.norm(dim=-1, keepdim=True).")
        uniq, inv = torch.unique(identities.to(device, torch.int64), return_inverse=True)
        u = uniq.numel()
        batch_sums = torch.zeros(u, d, dtype=torch.float64, device=device)
        batch_moment = torch.zeros(d, d, dtype=torch.float64, device=device) if self.second_moment else None
        for s in range(0, n, self._CHUNK):
            xs = work[s : s + self._CHUNK]
            batch_sums += torch.zeros(u, d, dtype=xs.dtype, device=device).index_add_(0, inv[s : s + self._CHUNK], xs)
            if batch_moment is not None:
                x64 = xs.double()
                batch_moment.addmm_(x64.T, x64)
        if not bool(torch.isfinite(batch_sums).all()):
            check_tensor("embeddings", work, finite=True)  # raises for NaN/inf
            raise InvalidArgumentError("embeddings: the class sums overflowed; the values are too large")
        # commit
        if self.dim is None:
            self.dim, self.device = d, device
            self.labels = torch.empty(0, dtype=torch.int64, device=device)
            self._sorted_labels = self._sorted_rows = self.labels
            self.sums = torch.zeros(0, d, dtype=torch.float64, device=device)
            self.counts = torch.zeros(0, dtype=torch.float64, device=device)
            self.total = torch.zeros(d, dtype=torch.float64, device=device)
            self.moment = torch.zeros(d, d, dtype=torch.float64, device=device) if self.second_moment else None
        rows = self._rows_for(uniq)
        self.sums.index_add_(0, rows, batch_sums)
        self.counts.index_add_(0, rows, torch.bincount(inv, minlength=u).double())
        self.total += batch_sums.sum(0)
        if batch_moment is not None:
            self.moment += batch_moment
        self.n += n

    def _rows_for(self, uniq: torch.Tensor) -> torch.Tensor:
        """Row index of each (sorted, unique) label, appending rows for labels not seen before."""
        m = self.labels.numel()
        rows = torch.empty_like(uniq)
        if m:
            pos = torch.searchsorted(self._sorted_labels, uniq).clamp_(max=m - 1)
            found = self._sorted_labels[pos] == uniq
            rows[found] = self._sorted_rows[pos[found]]
        else:
            found = torch.zeros_like(uniq, dtype=torch.bool)
        new = uniq[~found]
        n_new = int(new.numel())
        if n_new:
            rows[~found] = torch.arange(m, m + n_new, device=self.device)
            self.labels = torch.cat([self.labels, new])
            self.sums = torch.cat([self.sums, self.sums.new_zeros(n_new, self.dim)])
            self.counts = torch.cat([self.counts, self.counts.new_zeros(n_new)])
            self._sorted_labels, self._sorted_rows = torch.sort(self.labels)
        return rows

    # -- derived quantities ----------------------------------------------------------------------------------------
    @property
    def n_identities(self) -> int:
        return 0 if self.labels is None else int(self.labels.numel())

    def require(self, min_identities: int = 2) -> None:
        if self.n_identities < min_identities:
            raise InsufficientDataError(
                f"embeddings: need at least {min_identities} distinct identities to fit, got {self.n_identities}; "
                "call update(embeddings, identities) with more identities")

    def class_means(self) -> torch.Tensor:
        return self.sums / self.counts[:, None]

    def state(self) -> dict:
        return {"n_samples": self.n, "n_identities": self.n_identities, "dim": self.dim}


def _check_rank(rank: int | None) -> int | None:
    return None if rank is None else check_int("rank", rank, minimum=1)


# ---------------------------------------------------------------------------------------------------------------------
# Serialisation helpers (safetensors + JSON metadata, never pickle)
# ---------------------------------------------------------------------------------------------------------------------
def _save(path: str | Path, obj: Any, tensors: tuple[str, ...], fields: tuple[str, ...]) -> Path:
    """Write the ``tensors`` attributes of ``obj`` to safetensors, its class and ``fields`` as JSON metadata."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"class": type(obj).__name__, "format_version": _FORMAT_VERSION, **{k: getattr(obj, k) for k in fields}}
    payload = {k: getattr(obj, k).detach().to("cpu").contiguous() for k in tensors}
    save_file(payload, str(path), metadata={"privkit": json.dumps(meta, sort_keys=True)})
    return path


def _load(path: str | Path, expected_class: str, device: str | torch.device) -> tuple[dict[str, torch.Tensor], dict]:
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise InvalidArgumentError(f"path={str(path)!r} is not a file")
    with safe_open(str(path), framework="pt", device="cpu") as f:
        raw = (f.metadata() or {}).get("privkit")
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    if raw is None:
        raise InvalidArgumentError(f"path={str(path)!r} is a safetensors file without privkit metadata")
    meta = json.loads(raw)
    if meta.get("class") != expected_class:
        raise InvalidArgumentError(f"path={str(path)!r} holds a {meta.get('class')!r}, not a {expected_class!r}")
    if int(meta.get("format_version", -1)) != _FORMAT_VERSION:
        raise InvalidArgumentError(f"path={str(path)!r} has format_version {meta.get('format_version')}, expected 1")
    return {k: v.to(device) for k, v in tensors.items()}, meta


def _as_rows(name: str, z: torch.Tensor, dim: int) -> tuple[torch.Tensor, tuple[int, ...]]:
    check_tensor(name, z, ndim=None, floating=True, finite=False)
    if z.ndim == 0 or z.shape[-1] != dim:
        raise ShapeError(f"{name} must have shape (..., {dim}), got {tuple(z.shape)}")
    return z.reshape(-1, dim), tuple(z.shape)


def _finish(out: torch.Tensor, rows: torch.Tensor, renormalize: bool, check_finite: bool) -> torch.Tensor:
    """Re-normalise ``out`` in place if asked; reject non-finite inputs, read cheaply from the output rows.

    NaN or inf in an input row makes that output row non-finite, so its norm (or max) is non-finite: the (N,)
    check costs nothing next to the projection. Only then is the input scanned, to word the error exactly.
    """
    if renormalize:
        norms = torch.linalg.vector_norm(out, dim=1, keepdim=True)
        if check_finite and not bool(torch.isfinite(norms).all()):
            check_tensor("embeddings", rows, finite=True)  # raises for NaN/inf inputs; else the norm overflowed
            norms = torch.linalg.vector_norm(out.double(), dim=1, keepdim=True).to(out.dtype)
        return out.div_(norms.clamp_(min=1e-12))
    if check_finite and not bool(torch.isfinite(out.abs().amax(dim=1)).all()):
        check_tensor("embeddings", rows, finite=True)
    return out


# ---------------------------------------------------------------------------------------------------------------------
# Orthogonal projector (ISP, INLP)
# ---------------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class IdentityProjector:
    """A frozen orthogonal projector z ↦ (I − U Uᵀ) z, optionally re-normalised to unit length.

    Attributes:
        basis: (d, r) orthonormal basis U of the removed subspace.
        renormalize: divide the output by its L2 norm (the paper re-normalises; default True).
        method: which fitter produced it (``"isp"``, ``"inlp"`` or ``"custom"``).
        spectrum: singular values (ISP: of the centred class-mean matrix; INLP: per-direction classifier
            singular values), float64, for diagnostics. May be empty.
        info: JSON-serialisable provenance (number of identities and samples, rank rule, ...).
    """

    basis: torch.Tensor
    renormalize: bool = True
    method: str = "custom"
    spectrum: torch.Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.float64))
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_tensor("basis", self.basis, ndim=2, floating=True)
        d, r = self.basis.shape
        if r > d:
            raise ShapeError(f"basis must be (d, r) with r <= d, got {tuple(self.basis.shape)}")

    @property
    def rank(self) -> int:
        """Number of removed directions r."""
        return int(self.basis.shape[1])

    @property
    def dim(self) -> int:
        """Embedding dimension d."""
        return int(self.basis.shape[0])

    def __call__(self, embeddings: torch.Tensor, *, check_finite: bool = True) -> torch.Tensor:
        """Project (…, d) embeddings: z − (z U) Uᵀ as one fused ``addmm``, then re-normalise if asked.

        The output has the input's device and dtype (the basis is cast to them). Costs O(N·d·r).
        Rows that project to exactly zero stay zero when re-normalising. Inputs need not be unit norm.

        Args:
            embeddings: (…, d) floating tensor.
            check_finite: reject NaN/inf inputs (default True). Read from the output's row norms, so it costs O(N);
                the input is scanned only to word the error.
        """
        rows, shape = _as_rows("embeddings", embeddings, self.dim)
        u = self.basis.to(rows.device, rows.dtype)
        out = torch.addmm(rows, rows @ u, u.T, alpha=-1)
        return _finish(out, rows, self.renormalize, check_finite).reshape(shape)

    def matrix(self) -> torch.Tensor:
        """The d × d projector P = I − U Uᵀ (symmetric and idempotent), in the basis's dtype and device."""
        u = self.basis
        return torch.eye(self.dim, dtype=u.dtype, device=u.device) - u @ u.T

    def to(self, device: str | torch.device | None = None, dtype: torch.dtype | None = None) -> "IdentityProjector":
        """A copy with the basis on ``device`` and/or in ``dtype`` (the spectrum stays float64)."""
        return replace(self, basis=self.basis.to(device=device, dtype=dtype), spectrum=self.spectrum.to(device=device),
                       info=dict(self.info))

    def save(self, path: str | Path) -> Path:
        """Write a safetensors file (tensors ``basis`` and ``spectrum``; metadata as JSON). No pickle."""
        return _save(path, self, ("basis", "spectrum"), ("renormalize", "method", "info"))

    @classmethod
    def load(cls, path: str | Path, *, device: str | torch.device = "cpu") -> "IdentityProjector":
        """Read a projector written by :meth:`save`."""
        tensors, meta = _load(path, "IdentityProjector", device)
        return cls(tensors["basis"], renormalize=bool(meta["renormalize"]), method=str(meta["method"]),
                   spectrum=tensors["spectrum"], info=dict(meta.get("info", {})))

    def __repr__(self) -> str:
        return (f"IdentityProjector(method={self.method!r}, dim={self.dim}, rank={self.rank}, "
                f"renormalize={self.renormalize}, dtype={self.basis.dtype}, device={self.basis.device})")


class _StreamingFitter:
    """Plumbing shared by the fitters: streaming float64 identity statistics and a fit cached until the next update."""

    _second_moment: bool = False

    def _init_stats(self, require_unit_norm: bool) -> None:
        self._stats = _IdentityStats(second_moment=self._second_moment, require_unit_norm=require_unit_norm)
        self._cache: Any = None

    def _invalidate(self) -> None:
        self._cache = None

    @torch.no_grad()
    def update(self, embeddings: torch.Tensor, identities: torch.Tensor) -> Self:
        """Add a batch of (N, d) unit-norm embeddings with (N,) integer identity labels. Returns ``self``."""
        self._stats.update(embeddings, identities)
        self._invalidate()
        return self

    @property
    def n_identities(self) -> int:
        """Number of distinct identities seen so far."""
        return self._stats.n_identities


class IdentitySanitizer(_StreamingFitter):
    """Fitter of the Identity Sanitization Projection (ISP).

    Feed unit-norm embeddings with identity labels through :meth:`update` (any number of batches, on any device;
    repeated identities accumulate into the same float64 class sum; see ``_IdentityStats`` for the precision of
    float32 batches), then read :attr:`projector`. M is decomposed exactly (a symmetric eigenproblem of the smaller
    of MᵀM and MMᵀ, or a thin SVD — never a randomised SVD) on first access and cached until the next update.

    Rank: give ``rank`` explicitly, or let a rule choose it from the singular values σ_1 ≥ σ_2 ≥ … of the centred
    class-mean matrix M (privkit's rules; the paper does not say how r was chosen):

    * ``"energy"`` — the smallest r with Σ_{k≤r} σ_k² ≥ ``energy`` · Σ_k σ_k² (explained between-class variance);
    * ``"relative"`` — every direction with σ_k ≥ ``relative_sv`` · σ_1;
    * ``"full"`` — the numerical rank of M (σ_k > 1e-6 σ_1), which for r = rank(M) makes all fitting class
      means coincide after projection (before re-normalisation).

    A rule's rank is capped at the numerical rank of M (σ_k > 1e-6 σ_1); the projector's ``info`` reports
    ``rank_removed``, ``numerical_rank`` and ``rule_rank_before_cap``, so a capped rule is visible.

    Args:
        rank: number of directions to remove; must satisfy 1 ≤ rank ≤ min(d, m − 1) and rank ≤ numerical rank(M).
        rank_rule: ``"energy"``, ``"relative"`` or ``"full"``; used only when ``rank`` is None.
        energy: fraction in (0, 1] for the energy rule (default 0.9).
        relative_sv: threshold in (0, 1] for the relative rule (default 0.1).
        renormalize: whether the projector re-normalises its output (default True, as in the paper).
        solver: ``"gram"`` (eigendecomposition of the smaller of MᵀM, MMᵀ; default) or ``"svd"`` (thin SVD of M).
        require_unit_norm: reject embeddings whose rows are not unit norm (default True: ISP is defined on
            ℓ2-normalised embeddings).
    """

    def __init__(self, rank: int | None = None, *, rank_rule: Literal["energy", "relative", "full"] = "energy",
                 energy: float = 0.9, relative_sv: float = 0.1, renormalize: bool = True,
                 solver: Literal["gram", "svd"] = "gram", require_unit_norm: bool = True) -> None:
        self.rank = _check_rank(rank)
        self.rank_rule = check_choice("rank_rule", rank_rule, RANK_RULES)
        self.energy = check_probability("energy", energy, open_low=True, open_high=False)
        self.relative_sv = check_probability("relative_sv", relative_sv, open_low=True, open_high=False)
        self.renormalize = bool(renormalize)
        self.solver = check_choice("solver", solver, ("gram", "svd"))
        self._init_stats(require_unit_norm)
        self._spectrum: tuple[torch.Tensor, torch.Tensor] | None = None

    # -- accumulation (update, n_identities: see _StreamingFitter) --------------------------------------------------
    def _invalidate(self) -> None:
        self._cache = None
        self._spectrum = None

    @property
    def n_samples(self) -> int:
        return self._stats.n

    @property
    def identities(self) -> torch.Tensor:
        """Identity labels seen so far, in the row order of :meth:`class_means`."""
        self._stats.require(1)
        return self._stats.labels.clone()

    def class_means(self) -> torch.Tensor:
        """(m, d) float64 class means μ_i (not centred)."""
        self._stats.require(1)
        return self._stats.class_means()

    def centred_means(self) -> torch.Tensor:
        """(m, d) float64 rows μ_i − μ_C, with μ_C the mean of the class means; the rows of Mᵀ."""
        mu = self.class_means()
        return mu - mu.mean(0, keepdim=True)

    def _decompose(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._spectrum is None:
            self._stats.require(2)
            self._spectrum = top_singular_directions(self.centred_means(), solver=self.solver)
        return self._spectrum

    @property
    def singular_values(self) -> torch.Tensor:
        """All singular values of the centred class-mean matrix M (float64, descending)."""
        return self._decompose()[1].clone()

    def choose_rank(self) -> int:
        """The rank the projector will use (explicit ``rank`` or the rank rule), after validation."""
        _, s = self._decompose()
        m, d = self.n_identities, self._stats.dim
        num_rank = numerical_rank(s)
        if num_rank == 0:
            raise InsufficientDataError(
                "embeddings: all class means are identical (M = 0); there is no identity subspace to remove")
        if self.rank is not None:
            limit = min(d, m - 1)
            if self.rank > limit:
                raise InvalidArgumentError(
                    f"rank must lie in [1, min(d, m - 1)] = [1, {limit}] for d={d} and m={m} identities "
                    f"(the centred class-mean matrix has rank at most m - 1), got {self.rank}")
            if self.rank > num_rank:
                raise InsufficientDataError(
                    f"rank={self.rank} exceeds the numerical rank {num_rank} of the centred class-mean matrix; "
                    f"the extra directions would be arbitrary. Use rank <= {num_rank} or fit on more identities")
            return self.rank
        # A rule never removes more directions than M has: beyond the numerical rank the "singular vectors" are
        # arbitrary (or zero columns), and a zero column would be reported as a removed direction.
        return min(self._rule_rank(s), num_rank)

    def _rule_rank(self, s: torch.Tensor) -> int:
        """The rank the rule asks for, before the cap at the numerical rank of M."""
        if self.rank_rule == "full":
            return numerical_rank(s)
        if self.rank_rule == "relative":
            return max(1, int((s >= self.relative_sv * s[0]).sum()))
        energy = (s**2).cumsum(0) / (s**2).sum()
        r = int(torch.searchsorted(energy, torch.tensor(self.energy - 1e-12, dtype=energy.dtype, device=energy.device))) + 1
        return max(r, 1)

    @property
    def projector(self) -> IdentityProjector:
        """The fitted :class:`IdentityProjector` (computed on first access, cached until the next update)."""
        if self._cache is None:
            u, s = self._decompose()
            r = self.choose_rank()
            info = {**self._stats.state(), "rank_rule": "explicit" if self.rank is not None else self.rank_rule,
                    "rank_removed": r, "numerical_rank": numerical_rank(s),
                    "rule_rank_before_cap": self.rank if self.rank is not None else self._rule_rank(s),
                    "energy": self.energy, "relative_sv": self.relative_sv, "solver": self.solver,
                    "explained_energy": float((s[:r] ** 2).sum() / (s**2).sum())}
            self._cache = IdentityProjector(u[:, :r].contiguous(), renormalize=self.renormalize, method="isp",
                                            spectrum=s.clone(), info=info)
        return self._cache

    def __repr__(self) -> str:
        return (f"IdentitySanitizer(rank={self.rank}, rank_rule={self.rank_rule!r}, n_identities={self.n_identities}, "
                f"n_samples={self.n_samples})")


# ---------------------------------------------------------------------------------------------------------------------
# LEACE-style whitened erasure
# ---------------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class LeaceEraser:
    """A frozen affine eraser x ↦ x − ((x − μ) R) L, with R = W Q (d × r) and L = (W⁺ Q)ᵀ (r × d).

    In column-vector form x' = x − W⁺ Q Qᵀ W (x − μ): LEACE's closed form (privkit's own implementation).

    Attributes:
        mean: (d,) the fitting mean μ.
        right: (d, r) W Q.
        left: (r, d) (W⁺ Q)ᵀ.
        renormalize: divide the output by its L2 norm (default True, to compare with ISP on the sphere).
        info: JSON-serialisable provenance.
    """

    mean: torch.Tensor
    right: torch.Tensor
    left: torch.Tensor
    renormalize: bool = True
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_tensor("mean", self.mean, ndim=1, floating=True)
        d = self.mean.shape[0]
        check_tensor("right", self.right, ndim=2, floating=True)
        check_tensor("left", self.left, shape=(self.right.shape[1], d), floating=True)
        if self.right.shape[0] != d:
            raise ShapeError(f"right must have shape ({d}, r), got {tuple(self.right.shape)}")

    @property
    def rank(self) -> int:
        return int(self.right.shape[1])

    @property
    def dim(self) -> int:
        return int(self.mean.shape[0])

    def __call__(self, embeddings: torch.Tensor, *, check_finite: bool = True) -> torch.Tensor:
        """Erase (…, d) embeddings; output on the input's device and dtype. Costs O(N·d·r)."""
        rows, shape = _as_rows("embeddings", embeddings, self.dim)
        dev, dt = rows.device, rows.dtype
        mu, right, left = (t.to(dev, dt) for t in (self.mean, self.right, self.left))
        out = torch.addmm(rows, rows @ right - mu @ right, left, alpha=-1)
        return _finish(out, rows, self.renormalize, check_finite).reshape(shape)

    def matrix(self) -> torch.Tensor:
        """The linear part P = I − W⁺QQᵀW (column-vector convention: x' = μ + P (x − μ)). Oblique: P² = P, P ≠ Pᵀ."""
        return torch.eye(self.dim, dtype=self.right.dtype, device=self.right.device) - (self.right @ self.left).T

    def to(self, device: str | torch.device | None = None, dtype: torch.dtype | None = None) -> "LeaceEraser":
        mean, right, left = (t.to(device=device, dtype=dtype) for t in (self.mean, self.right, self.left))
        return replace(self, mean=mean, right=right, left=left, info=dict(self.info))

    def save(self, path: str | Path) -> Path:
        return _save(path, self, ("mean", "right", "left"), ("renormalize", "info"))

    @classmethod
    def load(cls, path: str | Path, *, device: str | torch.device = "cpu") -> "LeaceEraser":
        tensors, meta = _load(path, "LeaceEraser", device)
        return cls(tensors["mean"], tensors["right"], tensors["left"], renormalize=bool(meta["renormalize"]), info=dict(meta.get("info", {})))

    def __repr__(self) -> str:
        return f"LeaceEraser(dim={self.dim}, rank={self.rank}, renormalize={self.renormalize}, dtype={self.mean.dtype})"


def _whitening(cov: torch.Tensor, *, tol: float) -> tuple[torch.Tensor, torch.Tensor]:
    """W = (Σ^{1/2})⁺ and W⁺ = Σ^{1/2} on the range of Σ (eigenvalues > tol · λ_max)."""
    evals, vecs = torch.linalg.eigh(cov)
    keep = evals > tol * evals[-1].clamp(min=0)
    v = vecs[:, keep]
    root = evals[keep].sqrt()
    return (v / root) @ v.T, (v * root) @ v.T


class LeaceFitter(_StreamingFitter):
    """Fitter of LEACE-style whitened identity erasure (baseline; the closed form of Belrose et al. 2023).

    Statistics (streaming, float64): the total sum and second moment of the embeddings, and per-identity sums and
    counts. With population moments μ = E[x], Σ = E[xxᵀ] − μμᵀ and Σ_XZ[:, i] = (n_i/N)(μ_i − μ):

        W = (Σ^{1/2})⁺,  A = W Σ_XZ,  Q = orthonormal basis of col(A),  x' = x − W⁺ Q Qᵀ W (x − μ).

    After erasure every identity's class mean equals the global mean (no linear classifier can beat a constant).
    ``rank`` (privkit's addition, not part of LEACE) keeps only the top-``rank`` left singular vectors of A so that
    the baseline can be compared with ISP at equal rank; None keeps the full numerical rank (≤ m − 1).

    Args:
        rank: None (full LEACE) or the number of directions to erase.
        renormalize: whether the eraser re-normalises its output (default True).
        eig_tol: eigenvalues of Σ below ``eig_tol`` · λ_max are treated as zero in the pseudo-inverse.
        require_unit_norm: reject non-unit-norm embeddings (default True).
    """

    _second_moment = True

    def __init__(self, rank: int | None = None, *, renormalize: bool = True, eig_tol: float = 1e-10,
                 require_unit_norm: bool = True) -> None:
        self.rank = _check_rank(rank)
        self.renormalize = bool(renormalize)
        self.eig_tol = check_positive("eig_tol", eig_tol)
        self._init_stats(require_unit_norm)

    @property
    def eraser(self) -> LeaceEraser:
        """The fitted :class:`LeaceEraser` (cached until the next update)."""
        if self._cache is None:
            st = self._stats
            st.require(2)
            n = float(st.n)
            mu = st.total / n
            cov = st.moment / n - torch.outer(mu, mu)
            cov = 0.5 * (cov + cov.T)
            xz = (st.sums - st.counts[:, None] * mu) / n  # (m, d): rows are columns of Σ_XZ
            w, w_pinv = _whitening(cov, tol=self.eig_tol)
            q, s = top_singular_directions(xz @ w, solver="gram")  # xz @ w: the (m, d) rows of (W Σ_XZ)ᵀ (W symmetric)
            num_rank = numerical_rank(s)
            if num_rank == 0:
                raise InsufficientDataError("embeddings: class means are identical; nothing to erase")
            if self.rank is not None:
                limit = min(st.dim, st.n_identities - 1)
                if self.rank > limit:
                    raise InvalidArgumentError(f"rank must lie in [1, min(d, m - 1)] = [1, {limit}] for "
                                               f"m={st.n_identities} identities, got {self.rank}")
                if self.rank > num_rank:
                    raise InsufficientDataError(f"rank={self.rank} exceeds the numerical rank {num_rank} of W Σ_XZ")
            r = num_rank if self.rank is None else self.rank
            q = q[:, :r]
            info = {**st.state(), "rank": r, "full_rank": num_rank, "eig_tol": self.eig_tol}
            self._cache = LeaceEraser(mu, (w @ q).contiguous(), (w_pinv @ q).T.contiguous(),
                                      renormalize=self.renormalize, info=info)
        return self._cache


# ---------------------------------------------------------------------------------------------------------------------
# INLP
# ---------------------------------------------------------------------------------------------------------------------
class INLPFitter(_StreamingFitter):
    """Fitter of iterative nullspace projection (INLP) with a ridge multi-class classifier (baseline).

    Each iteration fits the least-squares classifier W_t = (P C P + λ I)⁻¹ P B on the currently projected data
    (C: centred scatter Σ (x − μ)(x − μ)ᵀ; B: centred cross-scatter with the one-hot identities, column i =
    n_i (μ_i − μ); λ = ``alpha`` · tr(C)/d), finds the ``directions_per_iteration`` combinations b of its m class
    outputs with the largest variance on the projected data (top eigenvectors of W_tᵀ P C P W_t), and adds their
    weight vectors W_t b to the nullspace basis. (Ranking directions by the raw size of classifier weights instead
    would favour low-variance noise directions, where least-squares weights are large.) Both C and B are streaming float64 statistics, so INLP needs no second
    pass over the data. The classic INLP removes the whole row space of a multi-class classifier each iteration,
    which for m ≥ d identities is everything; removing a few top directions per iteration is **privkit's
    definition**.

    Args:
        n_iterations: number of classifier fits.
        directions_per_iteration: directions removed per iteration (rank = product of the two).
            The projector's ``spectrum`` holds the per-sample variance of each removed classifier output.
        alpha: ridge strength relative to the mean eigenvalue of C (default 1e-3).
        renormalize: whether the projector re-normalises (default True).
        require_unit_norm: reject non-unit-norm embeddings (default True).
    """

    _second_moment = True

    def __init__(self, n_iterations: int = 10, *, directions_per_iteration: int = 1, alpha: float = 1e-3,
                 renormalize: bool = True, require_unit_norm: bool = True) -> None:
        self.n_iterations = check_int("n_iterations", n_iterations, minimum=1)
        self.directions_per_iteration = check_int("directions_per_iteration", directions_per_iteration, minimum=1)
        self.alpha = check_positive("alpha", alpha)
        self.renormalize = bool(renormalize)
        self._init_stats(require_unit_norm)

    @property
    def projector(self) -> IdentityProjector:
        """The fitted :class:`IdentityProjector` (method ``"inlp"``; cached until the next update)."""
        if self._cache is None:
            st = self._stats
            st.require(2)
            d, m = st.dim, st.n_identities
            total_rank = self.n_iterations * self.directions_per_iteration
            limit = min(d, m - 1)
            if total_rank > limit:
                raise InvalidArgumentError(f"n_iterations * directions_per_iteration must be <= min(d, m - 1) = "
                                           f"{limit} for d={d}, m={m} identities, got {total_rank}")
            mu = st.total / st.n
            c = st.moment - st.n * torch.outer(mu, mu)
            c = 0.5 * (c + c.T)
            b = (st.sums - st.counts[:, None] * mu).T  # (d, m)
            lam = self.alpha * float(torch.diagonal(c).sum()) / d
            eye = torch.eye(d, dtype=c.dtype, device=c.device)
            basis = torch.zeros(d, 0, dtype=c.dtype, device=c.device)
            strengths, residual = [], []  # per iteration: removed variances, relative cross-scatter left
            b_norm = float(torch.linalg.matrix_norm(b))
            for _ in range(self.n_iterations):
                p = eye - basis @ basis.T
                pb = p @ b
                residual.append(float(torch.linalg.matrix_norm(pb)) / max(b_norm, 1e-300))
                cp = p @ c @ p
                w = torch.linalg.solve(cp + lam * eye, pb)  # (d, m) ridge classifier weights
                # The classifier output (a combination b of the m class scores) with the most variance on the
                # projected data maximises bᵀ Wᵀ C_p W b; remove its weight vector W b. Solved in a basis of col(W).
                if w.shape[1] <= d:
                    span = w
                else:
                    e_val, e_vec = torch.linalg.eigh(w @ w.T)
                    keep = e_val > RANK_RTOL**2 * e_val[-1].clamp(min=0)
                    span = e_vec[:, keep] * e_val[keep].sqrt()
                h = span.T @ cp @ span
                h_val, h_vec = torch.linalg.eigh(0.5 * (h + h.T))
                h_val, h_vec = h_val.flip(0), h_vec.flip(1)
                new = span @ h_vec[:, : self.directions_per_iteration]
                s = h_val[: self.directions_per_iteration].clamp(min=0) / st.n
                if float(s[0]) <= 0:
                    raise InsufficientDataError("INLP: the classifier output has no variance left; nothing to remove")
                new, _ = torch.linalg.qr(new - basis @ (basis.T @ new))  # orthogonal to the removed directions
                basis = torch.cat([basis, new], dim=1)
                strengths.append(s[: self.directions_per_iteration])
            info = {**st.state(), "n_iterations": self.n_iterations,
                    "directions_per_iteration": self.directions_per_iteration, "alpha": self.alpha,
                    "relative_cross_scatter_before_each_iteration": residual}
            self._cache = IdentityProjector(basis.contiguous(), renormalize=self.renormalize, method="inlp",
                                            spectrum=torch.cat(strengths), info=info)
        return self._cache


# ---------------------------------------------------------------------------------------------------------------------
# Principal angles
# ---------------------------------------------------------------------------------------------------------------------
def _basis_of(name: str, u: torch.Tensor | IdentityProjector) -> torch.Tensor:
    if isinstance(u, IdentityProjector):
        u = u.basis
    check_tensor(name, u, ndim=2, floating=True)
    if u.shape[1] == 0 or u.shape[1] > u.shape[0]:
        raise ShapeError(f"{name} must be (d, r) with 1 <= r <= d, got {tuple(u.shape)}")
    u64 = u.double()
    gram = u64.T @ u64
    err = float((gram - torch.eye(gram.shape[0], dtype=gram.dtype, device=gram.device)).abs().max())
    if err > 1e-4:
        raise InvalidArgumentError(f"{name} must have orthonormal columns (|UᵀU − I| <= 1e-4), got max deviation "
                                   f"{err:.3g}; orthonormalise it with torch.linalg.qr")
    return u64


def principal_angles(basis_a: torch.Tensor | IdentityProjector,
                     basis_b: torch.Tensor | IdentityProjector) -> torch.Tensor:
    """Cosines of the principal angles between span(U_a) and span(U_b).

    The cosines are the singular values of U_aᵀ U_b (float64, descending, clipped to [0, 1]); the angles are their
    arccos. Both bases need orthonormal columns (projectors may be passed directly). The paper reports cosines
    > 0.99 between identity subspaces fitted on disjoint datasets.

    Args:
        basis_a: (d, r_a) orthonormal basis or an :class:`IdentityProjector`.
        basis_b: (d, r_b) orthonormal basis or an :class:`IdentityProjector`, same d.

    Returns:
        (min(r_a, r_b),) float64 tensor of cosines on ``basis_a``'s device.
    """
    ua = _basis_of("basis_a", basis_a)
    ub = _basis_of("basis_b", basis_b).to(ua.device)
    if ua.shape[0] != ub.shape[0]:
        raise ShapeError(f"basis_a and basis_b must have the same number of rows d, got {ua.shape[0]} and {ub.shape[0]}")
    return torch.linalg.svdvals(ua.T @ ub).clamp_(0.0, 1.0)
