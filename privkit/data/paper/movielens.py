"""MovieLens-100K: ``ml-100k/u.data``, ``ml-100k/u1.base`` ... ``u5.test``, ``ua.*``, ``ub.*``, ``u.info``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..._validate import check_choice
from ...errors import MissingResourceError
from .common import PathLike, _as_root, _format_error, _read_lines

__all__ = ["MovieLensRatings", "load_movielens_100k"]

_HOW_MOVIELENS = (
    "Download ml-100k.zip from https://grouplens.org/datasets/movielens/100k/ and unzip it into DATA_ROOT, "
    "giving DATA_ROOT/ml-100k/u.data, u.info and the official splits u1.base/u1.test ... u5.test, ua.*, ub.*."
)


@dataclass
class MovieLensRatings:
    """MovieLens-100K ratings as dense user x item matrices (0 = not rated).

    Attributes:
        ratings: (users, items) float32, every rating in ``u.data``.
        train: (users, items) float32, the ratings of ``<fold>.base``.
        test: (users, items) float32, the ratings of ``<fold>.test``.
        fold: the official split used (``"u1"`` .. ``"u5"``, ``"ua"``, ``"ub"``).
        meta: provenance.

    Row ``u`` is user id ``u + 1`` and column ``i`` is item id ``i + 1``.
    """

    ratings: torch.Tensor
    train: torch.Tensor
    test: torch.Tensor
    fold: str
    meta: dict = field(default_factory=dict)

    @property
    def n_users(self) -> int:
        return int(self.ratings.shape[0])

    @property
    def n_items(self) -> int:
        return int(self.ratings.shape[1])


def _read_ratings(path: Path) -> np.ndarray:
    rows = []
    for k, line in enumerate(_read_lines(path), start=1):
        parts = line.split("\t")
        if len(parts) != 4:
            raise _format_error(path, k, f"expected 'user<TAB>item<TAB>rating<TAB>timestamp', got {line!r}")
        try:
            u, i, r, _ = (int(x) for x in parts)
        except ValueError:
            raise _format_error(path, k, f"expected four integers, got {line!r}") from None
        if u < 1 or i < 1 or not 1 <= r <= 5:
            raise _format_error(path, k, f"ids start at 1 and ratings lie in 1..5, got {line!r}")
        rows.append((u, i, r))
    if not rows:
        raise _format_error(path, None, "holds no ratings")
    return np.asarray(rows, dtype=np.int64)


def _dense(path: Path, triples: np.ndarray, n_users: int, n_items: int) -> torch.Tensor:
    if triples[:, 0].max() > n_users or triples[:, 1].max() > n_items:
        raise _format_error(path, None, f"user/item ids exceed the {n_users} users x {n_items} items of u.info / u.data")
    flat = (triples[:, 0] - 1) * n_items + (triples[:, 1] - 1)
    if np.unique(flat).size != flat.size:
        raise _format_error(path, None, "rates some (user, item) pair more than once")
    m = torch.zeros(n_users * n_items, dtype=torch.float32)
    m[torch.from_numpy(flat)] = torch.from_numpy(triples[:, 2].astype(np.float32))
    return m.reshape(n_users, n_items)


def load_movielens_100k(data_root: PathLike, *, fold: str = "u1") -> MovieLensRatings:
    """Load MovieLens-100K and one of its official train/test splits.

    Args:
        data_root: folder holding ``ml-100k/``.
        fold: ``"u1"`` .. ``"u5"`` (the 5-fold 80/20 splits) or ``"ua"``/``"ub"`` (10 test ratings per user).

    Returns:
        MovieLensRatings; matrix sizes come from ``u.info`` when present (943 x 1682), else from the largest
        ids in ``u.data``.

    Raises:
        MissingResourceError: ``u.data`` or the fold files are missing.
        InvalidArgumentError: malformed files, or a fold whose train and test ratings overlap or are not in
            ``u.data``.
    """
    root = _as_root(data_root)
    fold = check_choice("fold", fold, ("u1", "u2", "u3", "u4", "u5", "ua", "ub"))
    base = root / "ml-100k"
    for f in ("u.data", f"{fold}.base", f"{fold}.test"):
        if not (base / f).is_file():
            raise MissingResourceError(f"MovieLens-100K file {f}", expected_at=str(base / f), how_to_get=_HOW_MOVIELENS)
    allr = _read_ratings(base / "u.data")
    n_users, n_items = int(allr[:, 0].max()), int(allr[:, 1].max())
    info = base / "u.info"
    if info.is_file():
        counts = {}
        for line in _read_lines(info):
            parts = line.split()
            if len(parts) == 2 and parts[0].isdigit():
                counts[parts[1]] = int(parts[0])
        if "users" in counts and "items" in counts:
            n_users, n_items = counts["users"], counts["items"]
    ratings = _dense(base / "u.data", allr, n_users, n_items)
    train = _dense(base / f"{fold}.base", _read_ratings(base / f"{fold}.base"), n_users, n_items)
    test = _dense(base / f"{fold}.test", _read_ratings(base / f"{fold}.test"), n_users, n_items)
    if bool(((train > 0) & (test > 0)).any()):
        raise _format_error(base / f"{fold}.test", None, f"shares ratings with {fold}.base; the split must be disjoint")
    for name, part in ((f"{fold}.base", train), (f"{fold}.test", test)):
        if not bool((part[part > 0] == ratings[part > 0]).all()):
            raise _format_error(base / name, None, "holds ratings that differ from or are absent in u.data")
    return MovieLensRatings(
        ratings=ratings, train=train, test=test, fold=fold,
        meta={"source": str(base), "n_ratings": int(allr.shape[0]), "n_train": int((train > 0).sum()),
              "n_test": int((test > 0).sum())},
    )
