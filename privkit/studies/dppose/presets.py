"""Scale presets and artefacts of the DP pose notebook (``notebooks/dppose.py``)."""

from __future__ import annotations

from dataclasses import dataclass, replace



@dataclass(frozen=True)
class DPPoseConfig:
    """Everything the scale decides in the DP pose notebook.

    The experiment design (which runs are trained) is derived from these fields by
    :func:`privkit.studies.dppose.experiments.design_runs`.

    Attributes:
        dataset: private data: ``"synthpose"`` (procedural, embedded) or ``"mpii"`` (from ``data_root``).
        image_size: square image side in pixels.
        n_private: private training images (synthpose; MPII uses its whole train split when 0).
        n_public: public images (synthpose ``public`` split: another style, disjoint identities).
        n_test: held-out evaluation images (synthpose: the private stream after the training images;
            MPII: its validation split, all of it when 0).
        backbone: ``"efficientnet_lite0"`` (real ImageNet weights from an installed package, frozen up to
            stride 16: the paper's frozen fine-tuning; features cached once), ``"convnet"`` (privkit's GroupNorm
            net, trained whole) or ``"tiny_vit_5m"`` (the paper's, weights from ``data_root``).
        width: base width of the conv net, or the neck width on EfficientNet-Lite0.
        pretrain_epochs: non-private epochs on the public set for the warm start.
        pretrain_lr: learning rate of that pretraining.
        batch_size: expected (Poisson) batch size of the private runs.
        epochs: private fine-tuning epochs.
        nonprivate_epochs: epochs of the non-private runs (the reference trained to its plateau, as the
            paper's non-private baselines are).
        lr: learning rate of the private runs (AdamW, as the paper's code).
        delta: target delta of every private run.
        epsilons: epsilon grid of DP-SGD and feature-projective DP (the paper's grid).
        epsilons_other: epsilon grid of projected and feature DP.
        clips: clipping norms; the first is the main one, the others are run at ``max(epsilons)``.
        seeds: seeds at ``max(epsilons)`` for every method of ``seed_methods`` (and the non-private reference),
            and for DP-SGD at ``min(epsilons)``.
        seed_methods: the private methods trained over ``seeds`` seeds.
        other_clip_methods: the private methods also run with the other clipping norms.
        blurred_baseline: also train the non-private baseline on blurred images psi(x) (the paper's).
        scratch_methods: methods also trained from scratch at ``max(epsilons)`` (warm start vs scratch).
        k: subspace rank of the projected methods.
        k_grid: further ranks for feature-projective DP at ``max(epsilons)`` (effect of k).
        n_public_grads: public per-sample gradients per subspace estimate (m).
        refresh: subspace refresh interval in steps.
        n_show: test images in the qualitative figure.
        accountant: ``"prv"`` or ``"rdp"`` for the add/remove methods (the feature methods always use the
            replace-one PLD accountant).
        ablation_backbone: a second frozen backbone in the other public-pretraining role (``"movenet_lightning"``:
            COCO *pose* pretraining, against the ImageNet backbone), trained with the same neck and head for the
            non-private reference and DP-SGD at the smallest and largest epsilon; None skips the ablation.
    """

    dataset: str
    image_size: int
    n_private: int
    n_public: int
    n_test: int
    backbone: str
    width: int
    pretrain_epochs: int
    pretrain_lr: float
    batch_size: int
    epochs: int
    nonprivate_epochs: int
    lr: float
    delta: float
    epsilons: tuple[float, ...]
    epsilons_other: tuple[float, ...]
    clips: tuple[float, ...]
    seeds: int
    seed_methods: tuple[str, ...]
    other_clip_methods: tuple[str, ...]
    blurred_baseline: bool
    scratch_methods: tuple[str, ...]
    k: int
    k_grid: tuple[int, ...]
    n_public_grads: int
    refresh: int
    n_show: int
    accountant: str
    ablation_backbone: str | None = None


_PAPER_EPS = (0.2, 0.4, 0.6, 0.8)

_ALL_PRIVATE = ("dpsgd", "projected", "feature", "feature_projective")

DEFAULT = DPPoseConfig(
    dataset="synthpose", image_size=128, n_private=8192, n_public=4096, n_test=512,
    backbone="efficientnet_lite0", width=64, pretrain_epochs=12, pretrain_lr=2e-3,
    batch_size=256, epochs=1, nonprivate_epochs=5, lr=1e-3, delta=4e-5,
    epsilons=_PAPER_EPS, epsilons_other=_PAPER_EPS, clips=(0.1, 0.01, 1.0), seeds=3,
    seed_methods=_ALL_PRIVATE, other_clip_methods=("dpsgd", "feature_projective"), blurred_baseline=True,
    scratch_methods=("nonprivate", "dpsgd", "feature", "feature_projective"), k=100, k_grid=(10, 250),
    n_public_grads=256, refresh=50, n_show=4, accountant="prv", ablation_backbone="movenet_lightning",
)
#: DEFAULT at the smallest sizes (one epsilon, one clip, one seed).
SMOKE = replace(
    DEFAULT, image_size=64, n_private=256, n_public=64, n_test=64, width=16, pretrain_epochs=1, batch_size=32,
    nonprivate_epochs=1, epsilons=(0.8,), epsilons_other=(0.8,), clips=(0.1,), seeds=1,
    seed_methods=("dpsgd", "feature_projective"), other_clip_methods=(), scratch_methods=("nonprivate",), k=16,
    k_grid=(4,), n_public_grads=32, refresh=4, n_show=3)
#: The paper's setting: MPII and TinyViT-5M, 25 epochs at batch 32, every clip for every private method.
PAPER = replace(
    DEFAULT, dataset="mpii", image_size=256, n_private=0, n_test=0, backbone="tiny_vit_5m", width=16,
    pretrain_epochs=10, pretrain_lr=1e-3, batch_size=32, epochs=25, nonprivate_epochs=25, clips=(0.01, 0.1, 1.0),
    other_clip_methods=_ALL_PRIVATE, k_grid=(10, 30, 200), n_show=6,
    # the blurred baseline would hold a second, blurred copy of MPII in memory (about 18 GB at 256 px): off here
    blurred_baseline=False)

ARTEFACTS = (
    ("fig1_pckh_vs_epsilon", "PCKh@0.5 of the five training methods against epsilon, warm start (paper's MPII grid, "
                             "Tables 3-10 / abstract numbers)"),
    ("fig2_gap_recovered", "fraction of the privacy gap recovered (the paper's 73% headline)"),
    ("fig3_per_joint", "PCKh@0.5 per joint at the largest epsilon (paper's per-joint tables)"),
    ("fig4_qualitative", "predicted vs ground-truth keypoints on held-out images (qualitative results)"),
    ("fig5_clip_and_init", "effect of the clipping norm C and of warm start vs training from scratch (paper's "
                           "C grid and training regimes)"),
    ("fig6_effect_of_k", "feature-projective DP against the subspace rank k (privkit's ablation [I]: the paper's k is not known)"),
    ("fig7_projection_diagnostics", "what projected DP-SGD depends on: energy of the clean private gradient in the "
                                    "public top-k subspace and the SNR gain of projecting, over k and training "
                                    "(privkit's diagnosis; no paper counterpart)"),
    ("table1_runs", "every run: method, init, epsilon, C, k, seed, PCKh@0.5 and the (epsilon, delta, sigma) that hold"),
    ("table2_paper_comparison", "our PCKh beside the paper's MPII PCKh@0.5 and HumanArt AP (docs/dppose.md)"),
    ("table3_per_joint", "PCKh@0.5 per joint and method at the largest epsilon"),
    ("table4_seed_spread", "run-to-run spread over seeds at the largest epsilon"),
    ("table5_claims", "the paper's claims as orderings, its numbers beside ours, and a verdict from the data "
                      "(holds / does not hold / not resolvable)"),
    ("table6_backbone_ablation", "public pose pretraining (frozen MoveNet-Lightning) against ImageNet "
                                 "(frozen EfficientNet-Lite0): non-private and DP-SGD PCKh@0.5 with the same neck and "
                                 "head, and MoveNet's own zero-shot PCKh"),
)

#: The paper path (MPII and TinyViT-5M from ``--data-root``) at smoke sizes, on the rehearsal root that
#: ``python -m privkit rehearsal-root`` writes: every paper branch runs, the numbers mean nothing.
REHEARSAL = replace(SMOKE, dataset="mpii", n_private=16, n_public=8, n_test=8, backbone="tiny_vit_5m", batch_size=8,
                    k=4, k_grid=(2,), n_public_grads=8, refresh=2, n_show=2)
PRESETS = {"smoke": SMOKE, "default": DEFAULT, "paper": PAPER, "rehearsal": REHEARSAL}
