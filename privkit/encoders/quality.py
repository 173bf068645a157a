"""How well each encoder separates identities on the embedded face sets: the verification AUC table.

``python -m privkit.encoders.quality`` embeds ``n_identities`` identities × ``views`` views of each embedded
face set with every available default-scale encoder and writes, per (encoder, face set), the area under the ROC
curve of cosine similarity over all pairs (genuine = same identity). The README's model table quotes this file
(``figures/encoders/verification_auc.csv``), and a test checks the quotes against it.

The protocol is deliberately simple: all pairs of a small, seeded slice, faces at a fixed size with their exact
boxes (face encoders crop with them; the others see the whole image). Each identity of ``lfw-subset-views`` and
``portraits-views`` is *one photograph* in several synthetic views, which makes these AUCs higher than on real
photo sets with independent photos per person; they rank encoders, they are not benchmark accuracies.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
import torch

from .._validate import check_int, check_min_count

__all__ = ["pair_auc", "verification_auc_table", "FACE_SETS", "main"]

#: The face sets the table covers.
FACE_SETS: tuple[str, ...] = ("lfw-subset-views", "portraits-views")


def pair_auc(embeddings: torch.Tensor, identities: torch.Tensor) -> float:
    """AUC of cosine similarity over all pairs of rows (genuine = same identity); rows are unit vectors."""
    from ..metrics import pair_auc as _pair_auc

    check_min_count("identities", len(identities), 2, "rows")
    z = embeddings.double()
    return _pair_auc(z @ z.T, identities)


def verification_auc_table(encoders: list[str] | None = None, *, face_sets: tuple[str, ...] = FACE_SETS,
                           n_identities: int = 100, views: int = 4, size: int = 112, seed: int = 0,
                           device: str = "cpu") -> pd.DataFrame:
    """Verification AUC of each encoder on each face set (see the module docstring for the protocol).

    Args:
        encoders: registry names (default: every available default-scale encoder).
        face_sets: embedded face sets to use.
        n_identities, views, size, seed: the slice (identities × views at ``size`` px, seeded).
        device: where to run the encoders.

    Returns:
        One row per (encoder, face set): ``encoder, kind, dim, face_set, n_identities, views, size, seed, auc,
        seconds``.
    """
    from ..data import load_faces
    from .registry import list_encoders, load_encoder

    n_identities = check_int("n_identities", n_identities, minimum=2)
    views = check_int("views", views, minimum=2)
    infos = {i.name: i for i in list_encoders(scale="default")}
    names = encoders or [n for n, i in infos.items() if i.available]
    faces = {fs: load_faces(fs, n_identities=n_identities, images_per_identity=views, size=size, seed=seed)
             for fs in face_sets}
    rows = []
    for name in names:
        enc = load_encoder(name, device=device)
        for fs, data in faces.items():
            t0 = time.perf_counter()
            z = enc.embed(data.images, boxes=data.box)
            rows.append({"encoder": name, "kind": enc.kind, "dim": enc.dim, "face_set": fs,
                         "n_identities": n_identities, "views": views, "size": size, "seed": seed,
                         "auc": pair_auc(z.cpu(), data.identity.cpu()), "seconds": time.perf_counter() - t0})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="verification AUC of every default-scale encoder on the face sets")
    p.add_argument("--encoders", nargs="*", default=None)
    p.add_argument("--n-identities", type=int, default=100)
    p.add_argument("--views", type=int, default=4)
    p.add_argument("--size", type=int, default=112)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("figures/encoders/verification_auc.csv"))
    args = p.parse_args(argv)
    torch.manual_seed(args.seed)
    table = verification_auc_table(args.encoders, n_identities=args.n_identities, views=args.views,
                                   size=args.size, seed=args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out, index=False)
    print(table.pivot(index="encoder", columns="face_set", values="auc").round(3).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
