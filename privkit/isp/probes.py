"""The attacker's verification probes (paper 1, docs/isp.md §3): raw cosine, ridge, MLP.

A probe maps unit-norm embeddings to unit-norm verification embeddings; the verification score is the cosine of the
mapped embeddings. Probes are fitted on the probe-fit identities only and their hyperparameters are selected on
validation TAR (threshold set on the validation impostor pairs), never on test identities.

* :class:`RawProbe` — no probe: the embeddings themselves.
* :class:`RidgeProbe` — multi-output ridge regression to one-hot identity targets,
  W = (ZᵀZ + λI)⁻¹ ZᵀY (d × m, no intercept), score cos(Wᵀz_a, Wᵀz_b). λ is chosen on validation TAR from a log
  grid (default 1e-3 … 1e3, 13 values). One float64 eigendecomposition of ZᵀZ serves the whole grid.
* :class:`MLPProbe` — privkit's reading of the paper's MLP: Linear(d, 512) → ReLU → Linear(512, 256) is the 256-d
  verification embedding (taken before its ReLU), and ReLU → Linear(256, m) gives identity logits for the softmax
  cross-entropy. Adam (lr 1e-3), mini-batches, early stopping on validation TAR (the best epoch's weights are kept).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import torch

from .._validate import check_int, check_positive, check_tensor
from ..errors import InsufficientDataError, InvalidArgumentError, ShapeError
from ..metrics import DEFAULT_MIN_FALSE_ACCEPTS
from .verification import VerificationPairs, validation_tar

__all__ = ["MLPOptions", "DEFAULT_RIDGE_LAMBDAS", "RawProbe", "RidgeProbe", "fit_ridge_probe", "select_ridge_probe",
           "MLPProbe", "fit_mlp_probe"]

#: The ridge λ grid: 13 values, log-spaced from 1e-3 to 1e3.
DEFAULT_RIDGE_LAMBDAS: tuple[float, ...] = tuple(float(10.0 ** (e / 2)) for e in range(-6, 7))


def _init_(module: torch.nn.Module, generator: torch.Generator | None) -> None:
    """PyTorch's default fan-in uniform initialisation, drawn from ``generator`` (no global RNG)."""
    for mod in module.modules():
        if isinstance(mod, (torch.nn.Linear, torch.nn.Conv2d)):
            torch.nn.init.kaiming_uniform_(mod.weight, a=math.sqrt(5), generator=generator)
            if mod.bias is not None:
                bound = 1.0 / math.sqrt(mod.weight[0].numel())  # 1 / sqrt(fan_in)
                torch.nn.init.uniform_(mod.bias, -bound, bound, generator=generator)


def _labels(identities: torch.Tensor, n: int, name: str = "identities") -> tuple[torch.Tensor, int]:
    check_tensor(name, identities, ndim=1)
    if identities.is_floating_point():
        raise InvalidArgumentError(f"{name} must be an integer tensor, got dtype {identities.dtype}")
    if identities.shape[0] != n:
        raise ShapeError(f"{name} must have shape ({n},), got {tuple(identities.shape)}")
    uniq, inv = torch.unique(identities, return_inverse=True)
    if uniq.numel() < 2:
        raise InsufficientDataError(f"{name}: need at least 2 identities to fit a probe, got {uniq.numel()}")
    return inv, int(uniq.numel())


class RawProbe:
    """The identity map (raw cosine baseline). Returns the embeddings re-normalised."""

    name = "raw"

    def __call__(self, embeddings: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(embeddings, dim=-1)

    def __repr__(self) -> str:
        return "RawProbe()"


@dataclass(frozen=True, eq=False)
class RidgeProbe:
    """z ↦ normalise(z W), W = (ZᵀZ + λI)⁻¹ ZᵀY.

    Attributes:
        weight: (d, m) ridge coefficients (m probe-fit identities).
        lam: the ridge strength λ.
    """

    weight: torch.Tensor
    lam: float
    name = "ridge"

    def __call__(self, embeddings: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(embeddings @ self.weight.to(embeddings.device, embeddings.dtype), dim=-1)

    def __repr__(self) -> str:
        return f"RidgeProbe(lam={self.lam:g}, dim={self.weight.shape[0]}, n_identities={self.weight.shape[1]})"


class _RidgePath:
    """Eigendecomposition of ZᵀZ and ZᵀY (float64) for solving many λ at once."""

    def __init__(self, embeddings: torch.Tensor, identities: torch.Tensor) -> None:
        check_tensor("embeddings", embeddings, ndim=2, floating=True)
        inv, m = _labels(identities.to(embeddings.device), embeddings.shape[0])
        z = embeddings.double()
        self.evals, self.evecs = torch.linalg.eigh(z.T @ z)
        zty = torch.zeros(m, z.shape[1], dtype=torch.float64, device=z.device).index_add_(0, inv, z).T  # (d, m)
        self.proj = self.evecs.T @ zty
        self.dtype = embeddings.dtype

    def weight(self, lam: float) -> torch.Tensor:
        return (self.evecs @ (self.proj / (self.evals.clamp(min=0) + lam)[:, None])).to(self.dtype)


def fit_ridge_probe(embeddings: torch.Tensor, identities: torch.Tensor, *, lam: float = 1.0) -> RidgeProbe:
    """Fit the ridge probe at a given λ > 0 on (N, d) embeddings and (N,) identities."""
    lam = check_positive("lam", lam)
    return RidgeProbe(_RidgePath(embeddings, identities).weight(lam), lam)


def select_ridge_probe(train_emb: torch.Tensor, train_id: torch.Tensor, val_emb: torch.Tensor,
                       val_pairs: VerificationPairs, *, lambdas: Sequence[float] | None = None, far: float = 1e-4,
                       min_false_accepts: int = DEFAULT_MIN_FALSE_ACCEPTS,
                       chunk_size: int | None = None) -> tuple[RidgeProbe, pd.DataFrame]:
    """Fit ridge probes over a λ grid and keep the one with the highest validation TAR at ``far``.

    Ties go to the larger λ (the more regularised probe).

    Args:
        train_emb, train_id: probe-fit embeddings and identities.
        val_emb: validation embeddings (the images ``val_pairs`` was planned on).
        val_pairs: the planned validation pairs (:meth:`VerificationPairs.create`).
        lambdas: the grid (default :data:`DEFAULT_RIDGE_LAMBDAS`).
        far: selection FAR (threshold set on the validation impostor pairs).

    Returns:
        (best probe, DataFrame with columns lam, val_tar, selected).
    """
    grid = DEFAULT_RIDGE_LAMBDAS if lambdas is None else tuple(check_positive("lambdas", x) for x in lambdas)
    if not grid:
        raise InvalidArgumentError("lambdas must contain at least one value > 0")
    path = _RidgePath(train_emb, train_id)
    val = val_emb.to(train_emb.device)
    with torch.no_grad():
        scores = [validation_tar(val_pairs, RidgeProbe(path.weight(lam), lam)(val), far=far,
                                 min_false_accepts=min_false_accepts, chunk_size=chunk_size) for lam in grid]
    best = max(range(len(grid)), key=lambda i: (scores[i], grid[i]))
    table = pd.DataFrame({"lam": list(grid), "val_tar": scores, "selected": [i == best for i in range(len(grid))]})
    return RidgeProbe(path.weight(grid[best]), grid[best]), table


class MLPProbe(torch.nn.Module):
    """Two-layer MLP probe: d → hidden[0] → hidden[1] (the verification embedding) → identity logits.

    Args:
        dim: input dimension d.
        n_classes: number of probe-fit identities m.
        hidden: (512, 256) by default.
        generator: seeds the weight initialisation (PyTorch's default uniform fan-in scheme); no global RNG is used.
    """

    name = "mlp"

    def __init__(self, dim: int, n_classes: int, *, hidden: tuple[int, int] = (512, 256),
                 generator: torch.Generator | None = None) -> None:
        super().__init__()
        dim = check_int("dim", dim, minimum=1)
        n_classes = check_int("n_classes", n_classes, minimum=2)
        h1, h2 = (check_int("hidden", h, minimum=1) for h in hidden)
        self.fc1 = torch.nn.utils.skip_init(torch.nn.Linear, dim, h1)
        self.fc2 = torch.nn.utils.skip_init(torch.nn.Linear, h1, h2)
        self.head = torch.nn.utils.skip_init(torch.nn.Linear, h2, n_classes)
        _init_(self, generator)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The un-normalised 256-d penultimate embedding."""
        return self.fc2(torch.relu(self.fc1(x)))

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Identity logits (what the cross-entropy trains)."""
        return self.head(torch.relu(self.features(x)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The unit-norm verification embedding (what the protocol scores)."""
        return torch.nn.functional.normalize(self.features(x.to(self.fc1.weight.dtype)), dim=-1)


@dataclass(frozen=True)
class MLPOptions:
    """The MLP probe's training set-up (Adam, cross-entropy over the probe-fit identities, early stopping).

    Attributes:
        hidden: widths of the two hidden layers.
        lr: Adam's learning rate.
        batch_size: minibatch size.
        max_epochs: epochs at most.
        patience: epochs without a better validation TAR before stopping.
    """

    hidden: tuple[int, int] = (512, 256)
    lr: float = 1e-3
    batch_size: int = 256
    max_epochs: int = 50
    patience: int = 5

    def __post_init__(self) -> None:
        check_positive("lr", self.lr)
        check_int("batch_size", self.batch_size, minimum=1)
        check_int("max_epochs", self.max_epochs, minimum=1)
        check_int("patience", self.patience, minimum=1)
        if len(tuple(self.hidden)) != 2:
            raise InvalidArgumentError(f"hidden must hold two layer widths, got {self.hidden!r}")
        for h in self.hidden:
            check_int("hidden", h, minimum=1)


def fit_mlp_probe(train_emb: torch.Tensor, train_id: torch.Tensor, val_emb: torch.Tensor, val_pairs: VerificationPairs,
                  *, options: MLPOptions | None = None, far: float = 1e-4,
                  min_false_accepts: int = DEFAULT_MIN_FALSE_ACCEPTS, seed: int = 0,
                  chunk_size: int | None = None) -> tuple[MLPProbe, pd.DataFrame]:
    """Train the MLP probe with cross-entropy over the probe-fit identities; early stopping on validation TAR.

    After every epoch the validation TAR at ``far`` is measured (threshold set on the validation impostor pairs);
    training stops after ``patience`` epochs without improvement and the best epoch's weights are returned.

    Args:
        train_emb, train_id: probe-fit embeddings (N, d) and identities.
        val_emb, val_pairs: validation embeddings and their planned pairs.
        options: the training set-up (:class:`MLPOptions`; default 512-256 hidden units, Adam at 1e-3).
        far: selection FAR.
        seed: seeds the initialisation and the shuffling.

    Returns:
        (probe in eval mode, DataFrame with columns epoch, train_loss, val_tar).
    """
    check_tensor("train_emb", train_emb, ndim=2, floating=True)
    inv, m = _labels(train_id.to(train_emb.device), train_emb.shape[0], "train_id")
    options = MLPOptions() if options is None else options
    if not isinstance(options, MLPOptions):
        raise InvalidArgumentError(f"options must be an MLPOptions, got {type(options).__name__}")
    generator = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
    dev = train_emb.device
    net = MLPProbe(train_emb.shape[1], m, hidden=tuple(options.hidden), generator=generator).to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=options.lr)
    x, val = train_emb.float(), val_emb.to(dev).float()
    history = []
    best_tar, best_state, best_epoch, stale = -1.0, None, 0, 0
    for epoch in range(1, options.max_epochs + 1):
        net.train()
        perm = torch.randperm(x.shape[0], generator=generator).to(dev)
        total = 0.0
        for s in range(0, x.shape[0], options.batch_size):
            idx = perm[s : s + options.batch_size]
            loss = torch.nn.functional.cross_entropy(net.logits(x[idx]), inv[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach()) * idx.numel()
        net.eval()
        with torch.no_grad():
            tar = validation_tar(val_pairs, net(val), far=far, min_false_accepts=min_false_accepts,
                                 chunk_size=chunk_size)
        history.append({"epoch": epoch, "train_loss": total / x.shape[0], "val_tar": tar})
        if tar > best_tar:
            best_tar, best_epoch, stale = tar, epoch, 0
            best_state = copy.deepcopy(net.state_dict())
        else:
            stale += 1
            if stale >= options.patience:
                break
    net.load_state_dict(best_state)
    net.eval()
    table = pd.DataFrame(history)
    return net, table.assign(selected=table["epoch"] == best_epoch)
