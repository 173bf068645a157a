"""Face embeddings of the ScoreShield notebook: centring, the verification sets of Table 1 and the impostor set.

Every face set is embedded once per backbone (through the embedding cache) and centred on the mean embedding of
its *training* identities, which are disjoint from the evaluated ones and hence public [I]; the impostor set is
centred on its own mean (label-free).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from privkit._validate import check_int, check_tensor
from privkit.data.cache import cached_embeddings
from privkit.data.splits import identity_splits
from privkit.metrics import smallest_resolvable_far
from privkit.errors import InvalidArgumentError
from privkit.studies.embedding import EmbedRequest, FaceSource, Jobs, embed_all, load_source
from privkit.studies.scoreshield.experiments import impostor_pairs, template_features

__all__ = ["centre_embeddings", "embed_face_set", "embed_impostor_faces", "face_sources", "planned_embeddings",
           "embed_main",
           "training_mask", "centring_summary", "load_verification_sets", "embed_verification_sets",
           "embed_impostor_set", "face_set_summary", "ijb_template_features"]


def centre_embeddings(embeddings: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
    """Float64 embeddings minus the mean of ``rows`` (a boolean mask; None: every row), re-normalised to unit norm.

    Raises:
        ShapeError: ``embeddings`` is not 2-D or ``rows`` is not an (N,) mask.
        InvalidArgumentError: ``rows`` selects no row.
    """
    check_tensor("embeddings", embeddings, ndim=2, finite=False)
    e = embeddings.double()
    if rows is None:
        centre = e.mean(0)
    else:
        check_tensor("rows", rows, shape=(e.shape[0],))
        if not bool(rows.any()):
            raise InvalidArgumentError("rows must select at least one embedding to centre on")
        centre = e[rows].mean(0)
    return torch.nn.functional.normalize(e - centre, dim=1)


def training_mask(identity: torch.Tensor, *, seed: int = 0) -> torch.Tensor:
    """Boolean mask of the images whose identity falls in the training part of :func:`identity_splits`."""
    check_tensor("identity", identity, ndim=1)
    return torch.isin(identity, identity_splits(identity, seed=seed)["train"])


def embed_face_set(encoder: Any, faces: Any, *, size: int, scale: str, seed: int = 0) -> torch.Tensor:
    """The encoder's embeddings of every image of a face set (at their exact boxes), through the embedding cache.

    The cache key holds the encoder, the set, the seed, the number of images, the image size and the scale.
    """
    return cached_embeddings(lambda: encoder.embed(faces.images, boxes=faces.box), encoder=encoder.name,
                             dataset=faces.name, split="all", seed=seed,
                             extra={"n": len(faces), "size": size, "scale": scale}, inputs=(faces.images, faces.box))


def embed_impostor_faces(encoder: Any, faces: Any, *, size: int, seed: int = 0) -> torch.Tensor:
    """The encoder's embeddings of the impostor set (at its exact boxes), through the embedding cache (its key holds
    the encoder, the set, the seed, the number of images and the image size)."""
    return cached_embeddings(lambda: encoder.embed(faces.images, boxes=faces.box), encoder=encoder.name,
                             dataset=faces.name, split="all", seed=seed, extra={"n": len(faces), "size": size},
                             inputs=(faces.images, faces.box))


def face_sources(cfg: Any, *, paper_data: bool, seed: int = 0,
                 data_root: str | None = None) -> tuple[dict[str, FaceSource], FaceSource | None]:
    """What makes every face set of the notebook: ``({set name: source}, impostor set's source or None)``.

    The main set is LFW (from ``data_root``) with ``paper_data`` (the paper and rehearsal scales), else ``cfg.face_set``; the other verification sets
    and the impostor set are embedded sets (:func:`privkit.data.load_faces`).

    Raises:
        InvalidArgumentError: ``cfg.verification_sets`` lacks ``cfg.face_set``, or ``cfg.impostor_identities < 2``.
    """
    if cfg.face_set not in cfg.verification_sets:
        raise InvalidArgumentError(f"verification_sets {tuple(cfg.verification_sets)} must include face_set "
                                   f"{cfg.face_set!r}")
    if cfg.impostor_identities is not None:  # None: every identity of the set
        check_int("impostor_identities", cfg.impostor_identities, minimum=2)

    def embedded(name: str) -> FaceSource:
        return FaceSource("load_faces", {"name": name, "n_identities": cfg.n_identities,
                                         "images_per_identity": cfg.images_per_identity, "size": cfg.face_size,
                                         "seed": seed})

    sets = {name: (FaceSource("load_lfw", {"size": cfg.face_size}, data_root)
                   if name == cfg.face_set and paper_data else embedded(name))
            for name in cfg.verification_sets}
    sets = {cfg.face_set: sets[cfg.face_set], **sets}  # the main set first
    imp = None if cfg.impostor_set is None else FaceSource(
        "load_faces", {"name": cfg.impostor_set, "n_identities": cfg.impostor_identities, "size": cfg.face_size,
                       "seed": seed})
    return sets, imp


def planned_embeddings(cfg: Any, encoders: Mapping[str, Any], *, scale: str, paper_data: bool, seed: int = 0,
                       data_root: str | None = None) -> list[tuple[Any, FaceSource]]:
    """Every ``faces.embed`` job the notebook asks for, with its face set's source (what ``python -m privkit plan``
    lists): the main set by dlib, each verification set by each backbone, the impostor set by each backbone.

    Args:
        encoders: loaded encoders by name (``dlib-resnet-fr`` and ``cfg.face_encoders``).
        scale: part of the embeddings' cache key; paper_data: as :func:`face_sources`.
    """
    from privkit.studies.embedding import embed_spec

    sets, imp = face_sources(cfg, paper_data=paper_data, seed=seed, data_root=data_root)
    opts = {"size": cfg.face_size, "scale": scale}
    reqs = [EmbedRequest(sets[cfg.face_set], None, encoders["dlib-resnet-fr"], "scoreshield", opts, seed, "cpu")]
    reqs += [EmbedRequest(src, None, encoders[e], "scoreshield", opts, seed, "cpu") for e in cfg.face_encoders
             for src in sets.values()]
    if imp is not None:
        reqs += [EmbedRequest(imp, None, encoders[e], "scoreshield-impostor", {"size": cfg.face_size}, seed, "cpu")
                 for e in cfg.face_encoders]
    out = {}
    for r in reqs:  # the main set by dlib is also a verification cell: listed once
        spec = embed_spec(r)
        out.setdefault(spec.key(), (spec, r.source))
    return list(out.values())


def embed_main(encoder: Any, faces: Any, source: FaceSource, *, size: int, scale: str, seed: int = 0,
               jobs: Jobs | None = None) -> tuple[torch.Tensor, int]:
    """The main face set's embeddings by ``encoder`` (on the CPU) as a ``faces.embed`` job of ``jobs`` (None: here),
    and the encoder's failures to enrol while computing them (0 from the cache)."""
    e = embed_all([EmbedRequest(source, faces, encoder, "scoreshield", {"size": size, "scale": scale}, seed, "cpu")],
                  jobs)[0]
    return e.emb, e.failures_to_enrol


def centring_summary(raw: torch.Tensor, centred: torch.Tensor, identity: torch.Tensor) -> str:
    """The mean cosine between images of different identities, before and after centring (evaluated rows only)."""
    check_tensor("raw", raw, ndim=2, finite=False)
    check_tensor("centred", centred, shape=tuple(raw.shape), finite=False)
    check_tensor("identity", identity, shape=(raw.shape[0],))
    raw_cos = raw.double() @ raw.double().T
    diff = identity[:, None] != identity[None]
    return (f"mean cosine between different identities: raw {float(raw_cos[diff].mean()):.3f}, "
            f"centred {float((centred @ centred.T)[diff].mean()):.3f}")


def load_verification_sets(main: tuple[Any, torch.Tensor], *, main_name: str, sources: Mapping[str, FaceSource],
                           seed: int = 0) -> dict[str, tuple[Any, torch.Tensor]]:
    """The face sets of Table 1 with their training masks, the main set (already loaded) first.

    Args:
        main: the main face set and its training mask; main_name: its name.
        sources: every verification set's source (:func:`face_sources`; must include ``main_name``); the others are
            loaded from theirs. seed: the identity split's seed.

    Raises:
        InvalidArgumentError: ``main_name`` is not among ``sources``.
    """
    if main_name not in sources:
        raise InvalidArgumentError(f"verification_sets {tuple(sources)} must include face_set {main_name!r}")
    sets = {main_name: main}
    for name, source in sources.items():
        if name not in sets:
            vs = load_source(source)
            sets[name] = (vs, training_mask(vs.identity, seed=seed))
    return sets


def embed_verification_sets(encoders: Mapping[str, Any], sets: Mapping[str, tuple[Any, torch.Tensor]], *,
                            sources: Mapping[str, FaceSource], encoder_names: Sequence[str], size: int, scale: str,
                            seed: int = 0, centre_all: Any = None,
                            jobs: Jobs | None = None) -> dict[tuple[str, str], dict[str, torch.Tensor]]:
    """Every (backbone, face set) embedded (one ``faces.embed`` job each, through the embedding cache; ``jobs=None``:
    here) and centred on the set's training identities.

    Args:
        encoders: loaded encoders by name; encoder_names: the backbones to run (keys of ``encoders``).
        sets: face sets and training masks (:func:`load_verification_sets`); sources: what made each.
        size, scale, seed: part of the cache key.
        centre_all: a face set that is centred on all its images instead (LFW's protocol has no training
            identities) [I]; None: none.

    Returns:
        ``{(backbone, set): {"all": centred embeddings, "eval": rows of the evaluated identities, "id": their
        identities}}``.

    Raises:
        InvalidArgumentError: a backbone missing from ``encoders``, or a set without a source.
    """
    missing = [n for n in encoder_names if n not in encoders]
    if missing:
        raise InvalidArgumentError(f"no loaded encoder for {missing}; loaded: {sorted(encoders)}")
    unsourced = [n for n in sets if n not in sources]
    if unsourced:
        raise InvalidArgumentError(f"no source for face sets {unsourced}; sources: {sorted(sources)}")
    cells = [(e, n) for e in encoder_names for n in sets]
    got = embed_all([EmbedRequest(sources[n], sets[n][0], encoders[e], "scoreshield", {"size": size, "scale": scale},
                                  seed, "cpu") for e, n in cells], jobs)
    out: dict[tuple[str, str], dict[str, torch.Tensor]] = {}
    for (enc_name, set_name), g in zip(cells, got):
        vs, train_mask = sets[set_name]
        fe = centre_embeddings(g.emb.double(), None if (centre_all is not None and vs is centre_all) else train_mask)
        out[(enc_name, set_name)] = {"all": fe, "eval": fe[~train_mask], "id": vs.identity[~train_mask]}
    return out


def embed_impostor_set(encoders: Mapping[str, Any], *, encoder_names: Sequence[str], source: FaceSource | None,
                       size: int, seed: int = 0,
                       jobs: Jobs | None = None) -> tuple[dict[str, dict[str, torch.Tensor]], str]:
    """Every pair of a set of distinct people as impostor pairs, per backbone (one ``faces.embed`` job each;
    ``jobs=None``: here), centred on the set's own mean.

    The impostor side of every false-match rate in Table 1 [I]: the verification sets' centres come from another
    image domain, so the impostor set is centred label-free on its own mean.

    Returns:
        ``({backbone: impostor pairs (:func:`impostor_pairs`)}, summary line)``; ``({}, "")`` when ``source`` is None.

    Raises:
        InvalidArgumentError: a backbone missing from ``encoders``.
    """
    if source is None:
        return {}, ""
    missing = [n for n in encoder_names if n not in encoders]
    if missing:
        raise InvalidArgumentError(f"no loaded encoder for {missing}; loaded: {sorted(encoders)}")
    imp_faces = load_source(source)
    got = embed_all([EmbedRequest(source, imp_faces, encoders[n], "scoreshield-impostor", {"size": size}, seed, "cpu")
                     for n in encoder_names], jobs)
    pairs = {n: impostor_pairs(centre_embeddings(g.emb.double()), imp_faces.identity)
             for n, g in zip(encoder_names, got)}
    n_imp = len(pairs[encoder_names[0]]["score"])
    text = (f"impostor set {imp_faces.name}: {len(imp_faces)} images of {imp_faces.n_identities} different people, "
            f"{n_imp:,} impostor pairs; smallest resolvable FAR 10/{n_imp:,} = {smallest_resolvable_far(n_imp):.2g}")
    return pairs, text


def face_set_summary(sets: Mapping[tuple[str, str], Mapping[str, torch.Tensor]],
                     impostors: Mapping[str, Mapping[str, torch.Tensor]]) -> list[str]:
    """One line per (backbone, face set): evaluated images and the impostor cosine mean ± sd (and the impostor set's)."""
    lines = []
    for (enc_name, set_name), d in sets.items():
        own = d["eval"] @ d["eval"].T
        diff = d["id"][:, None] != d["id"][None]
        msg = f"{enc_name} on {set_name}: {len(d['eval'])} evaluated images; impostor cosine mean ± sd " \
              f"{float(own[diff].mean()):.3f} ± {float(own[diff].std()):.3f}"
        if enc_name in impostors:
            ps = impostors[enc_name]["score"]
            msg += f" (impostor set: {float(ps.mean()):.3f} ± {float(ps.std()):.3f})"
        lines.append(msg)
    return lines


def ijb_template_features(ijb: Any, encoder: Any, *, name: str, size: int, batch_size: int = 2048,
                          seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """IJB template features: every face embedded (through the cache), centred on all of IJB's images, pooled.

    IJB has no training identities either, so it is centred label-free on its own mean [I]; pooling is
    :func:`template_features` (average the frames of each media, sum the media, normalise).

    Returns:
        ``(template ids, (T, d) unit-norm template features)``.

    Raises:
        InvalidArgumentError: ``batch_size < 1``.
    """
    check_int("batch_size", batch_size, minimum=1)

    def embed() -> torch.Tensor:
        out = []
        for _, batch in ijb.iter_faces(batch_size=batch_size, size=size):
            out.append(encoder.embed(batch.images, boxes=batch.box))
        return torch.cat(out)

    emb = cached_embeddings(embed, encoder=encoder.name, dataset=name.lower(), split="all", seed=seed,
                            extra={"n": len(ijb), "size": size}).double()
    return template_features(emb - emb.mean(0), ijb.template, ijb.media)
