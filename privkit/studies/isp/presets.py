"""Scale presets and artefacts of the ISP notebook (``notebooks/isp.py``)."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class IspConfig:
    """Everything the scale decides in the ISP notebook.

    Attributes:
        face_set: main identity-labelled face set (the leakage table, attribution, utility, inversion); at the paper
            scale CelebA from ``data_root``.
        transfer_set: the *other* face set, on which ISP-X is fitted (paper: VGGFace2 ↔ CelebA).
        n_identities, images_per_identity: size of the main set; transfer_identities, transfer_images: of the
            transfer set. face_size: image side in pixels. context_leakage: probability that a view's background
            is its identity's own scene (embedded sets only).
        split_counts: identities in (probe-fit, validation, test); the paper uses 320 / 80 / 80.
        encoders: ``"name:input"`` with input ``box`` (face crop) or ``image`` (whole image with context).
        probes: attacker probes of the main table ("raw" = cosine without a probe, "ridge", "mlp").
        ks: probe-fit shots per identity (the paper: 1, 4, 16); the main table uses the largest.
        fars: reported FARs (those the test pairs cannot resolve are shown as not resolvable, never as numbers).
        isp_rank: rank r of ISP-W/ISP-X in the main table; ranks: the rank sweep (capped at m − 1 of each fit).
        baseline_ranks: ranks at which ISP, LEACE and INLP are compared.
        n_boot: identity-bootstrap resamples; ridge_lambdas: the ridge probe's λ grid (chosen on validation TAR);
            mlp_epochs, mlp_patience: MLP probe training.
        knn_k: neighbours of the kNN utility; copy_references: images in the copy-detection database;
            imagenet_views: seeded views per scikit-image photo for efficientnet-lite0's ImageNet top-1 agreement.
        attribution_encoders: whole-image encoders for FII/CPI/B*; fii_images, fii_sigma, fii_regions, fcr_bins,
            cpi_sigmas, cpi_queries, bstar_pairs, bstar_betas: their settings.
        inversion_encoders: differentiable encoders attacked by inversion; inversion_targets: at most this many
            targets, one image per test identity (the auxiliary set is every probe-fit image); inversion_epochs,
            inversion_steps: conv-decoder epochs and latent-search steps; inversion_resolution: side of the
            reconstructed aligned face crops in pixels; inversion_margin: context kept around the face box in the
            crops (fraction of the box's longer side, each side); inversion_attacks: which attacks ("ridge", "conv",
            "optimisation"); inversion_fr_contrast: also invert the biometric reference's own embeddings
            (regression only); reference_far: FAR of the reference (dlib) threshold that decides inversion success.
    """

    face_set: str
    transfer_set: str
    n_identities: int
    images_per_identity: int
    transfer_identities: int
    transfer_images: int
    face_size: int
    context_leakage: float
    split_counts: tuple[int, int, int]
    encoders: tuple[str, ...]
    probes: tuple[str, ...]
    ks: tuple[int, ...]
    fars: tuple[float, ...]
    isp_rank: int
    ranks: tuple[int, ...]
    baseline_ranks: tuple[int, ...]
    n_boot: int
    ridge_lambdas: tuple[float, ...]
    mlp_epochs: int
    mlp_patience: int
    knn_k: int
    copy_references: int
    imagenet_views: int
    attribution_encoders: tuple[str, ...]
    fii_images: int
    fii_sigma: float
    fii_regions: int
    fcr_bins: int
    cpi_sigmas: tuple[float, ...]
    cpi_queries: int
    bstar_pairs: int
    bstar_betas: tuple[float, ...]
    inversion_encoders: tuple[str, ...]
    inversion_targets: int
    inversion_epochs: int
    inversion_steps: int
    inversion_resolution: int
    inversion_margin: float
    inversion_attacks: tuple[str, ...]
    inversion_fr_contrast: bool
    reference_far: float


#: The ridge λ grid at the embedded scales: decades from 1e-3 to 1e3 (the paper: "a log grid 1e-3 … 1e3").
_DECADES = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0)

#: B*'s revealed background fractions at the default and paper scales: 0, 0.1, ..., 1.
_BETAS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)

_ALL_DEFAULT = ("dlib-resnet-fr:box", "faceres:box", "mobileface:box", "age-gender:box", "mtcnn-onet:box",
                "efficientnet-lite0:image", "movenet-features:image", "ssl-small:image", "mtcnn-onet:image",
                "pixels:image", "pdq:image", "phash:image")

SMOKE = IspConfig(
    face_set="lfw-subset-views", transfer_set="synthfaces",
    n_identities=10, images_per_identity=4, transfer_identities=6, transfer_images=2, face_size=64,
    context_leakage=0.5, split_counts=(4, 3, 3),
    encoders=("dlib-resnet-fr:box", "mtcnn-onet:box", "pixels:image", "ssl-small:image"),
    probes=("raw", "ridge", "mlp"), ks=(4,), fars=(0.5, 0.25, 1e-1),
    isp_rank=2, ranks=(1, 2), baseline_ranks=(2,),
    n_boot=50, ridge_lambdas=_DECADES, mlp_epochs=5, mlp_patience=2, knn_k=5, copy_references=12, imagenet_views=2,
    attribution_encoders=("pixels:image",), fii_images=16, fii_sigma=4.0, fii_regions=2, fcr_bins=2,
    cpi_sigmas=(0.0, 4.0), cpi_queries=16, bstar_pairs=8, bstar_betas=(0.0, 0.5, 1.0),
    inversion_encoders=("pixels:image",), inversion_targets=3, inversion_epochs=2, inversion_steps=5,
    inversion_resolution=16, inversion_margin=0.2, inversion_attacks=("ridge", "conv"), inversion_fr_contrast=False,
    reference_far=0.25,
)
DEFAULT = IspConfig(
    face_set="portraits-views", transfer_set="lfw-subset-views",
    n_identities=609, images_per_identity=4, transfer_identities=100, transfer_images=4, face_size=96,
    context_leakage=0.5, split_counts=(259, 150, 200), encoders=_ALL_DEFAULT,
    probes=("raw", "ridge", "mlp"), ks=(1, 4), fars=(1e-2, 1e-3, 1e-4),
    isp_rank=16, ranks=(1, 2, 4, 8, 16, 32, 64, 128, 258), baseline_ranks=(16, 64),
    n_boot=200, ridge_lambdas=_DECADES, mlp_epochs=40, mlp_patience=5, knn_k=20, copy_references=400, imagenet_views=20,
    attribution_encoders=("efficientnet-lite0:image", "movenet-features:image", "ssl-small:image", "pixels:image",
                          "mtcnn-onet:image", "pdq:image", "phash:image"),
    fii_images=80, fii_sigma=4.0, fii_regions=4, fcr_bins=4,
    cpi_sigmas=(0.0, 1.0, 2.0, 4.0, 8.0), cpi_queries=120, bstar_pairs=60, bstar_betas=_BETAS,
    inversion_encoders=("efficientnet-lite0:image", "ssl-small:image"), inversion_targets=40,
    inversion_epochs=30, inversion_steps=25, inversion_resolution=32, inversion_margin=0.2,
    inversion_attacks=("ridge", "conv", "optimisation"), inversion_fr_contrast=True, reference_far=1e-3,
)
PAPER = IspConfig(
    face_set="celeba", transfer_set="vggface2",
    n_identities=480, images_per_identity=20, transfer_identities=480, transfer_images=20, face_size=224,
    context_leakage=0.5, split_counts=(320, 80, 80),
    encoders=("dlib-resnet-fr:box", "clip-vit-b16:image", "dinov2-vitb14:image", "sscd:image"),
    probes=("raw", "ridge", "mlp"), ks=(1, 4, 16), fars=(1e-3, 1e-4, 1e-5, 1e-6),
    isp_rank=16, ranks=(1, 2, 4, 8, 16, 32, 64, 128, 319), baseline_ranks=(16, 64, 319),
    n_boot=1000, ridge_lambdas=tuple(10.0 ** (e / 2) for e in range(-6, 7)), mlp_epochs=50, mlp_patience=5, knn_k=20,
    copy_references=1600, imagenet_views=20,
    attribution_encoders=("clip-vit-b16:image", "dinov2-vitb14:image", "sscd:image"),
    fii_images=1000, fii_sigma=8.0, fii_regions=4, fcr_bins=5,
    cpi_sigmas=(0.0, 2.0, 4.0, 8.0, 16.0), cpi_queries=1000, bstar_pairs=500, bstar_betas=_BETAS,
    inversion_encoders=("clip-vit-b16:image", "dinov2-vitb14:image"), inversion_targets=80,
    inversion_epochs=60, inversion_steps=200, inversion_resolution=64, inversion_margin=0.2,
    inversion_attacks=("ridge", "conv", "optimisation"), inversion_fr_contrast=True, reference_far=1e-3,
)

ARTEFACTS = (
    ("table1_leakage", "TAR at FAR (cosine/ridge/MLP, raw vs ISP-W vs ISP-X) per encoder, the paper's main table (Table 1)"),
    ("table2_paper_reference", "the paper's ridge TAR@1e-4 on CelebA-20 (CLIP, DINOv2, DINOv3, SSCD, ArcFace) beside ours"),
    ("fig1_leakage", "ridge/MLP TAR at the lowest resolvable FAR, raw vs ISP-W vs ISP-X, with identity-bootstrap CIs"),
    ("fig2_attribution", "FII by FCR bin, CPI against face-blur sigma, B* flip curves (paper's attribution study)"),
    ("table3_attribution", "median B*, mean FII and CPI(0)/CPI(max sigma) per encoder"),
    ("fig3_rank", "ridge TAR and utility (kNN, copy detection) against the ISP rank r"),
    ("table4_utility", "kNN attribute accuracy and copy-detection Recall@1/mAP as % of raw after ISP, LEACE, INLP"),
    ("table5_baselines", "ISP vs LEACE vs INLP at equal rank: ridge TAR and utility retention"),
    ("table6_subspaces", "principal-angle cosines between identity subspaces fitted on different data"),
    ("fig4_inversion", "template inversion to face crops before and after ISP: dlib verification at its FAR threshold, rank-1 identification, margin over mismatched reconstructions"),
    ("table7_inversion", "inversion success, rank-1 (chance 1/T) with Wilson intervals, and the margin over the mismatched control"),
    ("fig5_reconstructions", "example target face crops and their reconstructions from raw and ISP-sanitised embeddings"),
    ("table8_claims", "the paper's claims, its numbers beside ours with 95% intervals, and a verdict from the data "
                      "(holds / does not hold / not resolvable)"),
)

#: The paper path (CelebA, VGGFace2, CLIP, DINOv2, SSCD from ``--data-root``) at smoke sizes, on the rehearsal root
#: that ``python -m privkit rehearsal-root`` writes (40 identities x 4 images): every paper branch runs, the
#: numbers mean nothing.
REHEARSAL = replace(SMOKE, face_set="celeba", transfer_set="vggface2", n_identities=20, images_per_identity=4,
                    transfer_identities=10, transfer_images=4, split_counts=(10, 5, 5), encoders=PAPER.encoders,
                    attribution_encoders=("clip-vit-b16:image",), inversion_encoders=("dinov2-vitb14:image",))
PRESETS = {"smoke": SMOKE, "default": DEFAULT, "paper": PAPER, "rehearsal": REHEARSAL}
