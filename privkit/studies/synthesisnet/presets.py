"""Scale presets and artefacts of the SynthesisNet notebook (``notebooks/synthesisnet.py``).

Every number here is privkit's choice [I]: the paper's full text (and so its schedule, latent sizes and data
splits) could not be obtained.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class SynthesisNetPreset:
    """Everything the scale decides in the SynthesisNet notebook.

    Attributes:
        face_set: ``"portraits-views"`` (the default and smoke scales: 609 real portraits, each one identity in
            seeded views of its one photo), ``"lfw-subset-views"`` or ``"synthfaces"`` (embedded), or ``"celeba"``
            (paper scale, read from ``data_root``).
        n_train_identities, n_test_identities: identity-disjoint split (training the networks / publishing).
        images_per_identity: images loaded per identity (embedded sets; CelebA: at most this many).
        image_size: image side (64 on CPU; 128 the paper's).
        render_size: side at which the embedded face set is rendered before the aligned crops are cut (larger than
            ``image_size``, so small faces are not upsampled twice).
        align_margin: margin of the aligned face crops (:func:`~privkit.synthesisnet.data.aligned_faces`: a square
            around each face box, enlarged by this fraction of the box side on every side, resized to
            ``image_size``), mirroring CelebA's aligned & cropped images; ``None``: the images are used as loaded
            (CelebA's aligned crops at the paper scale).
        width, id_dim: SynthesisNet architecture (see :class:`~privkit.synthesisnet.SynthesisNetConfig`).
        att_dim: size of the attribute latent ``z_att``, published WITHOUT noise (the metric-DP guarantee covers
            ``z_id`` only), so it must carry as little identity as possible [I] (docs/synthesisnet.md §5b).
        linear_path: give the identity a linear path fitted in closed form on the training faces
            (:class:`~privkit.synthesisnet.SynthesisNetConfig`'s ``linear_path``) [I].
        clip_norm: radius of the identity latents = clip norm of the metric-DP mechanism (``None``: ``10 * id_dim``).
        lambda_id: weight of the identity-classification loss on ``z_id`` in the autoencoder phase [I] (§5b).
        noise_prob: share of GAN training samples whose identity latent is privatised as at publishing time (ε
            log-uniform in 0.01 .. 1), see :class:`~privkit.synthesisnet.SynthesisNetConfig` [I] (§5b).
        lambda_cls: weight of the auxiliary attribute-classification term of the GAN (generator and classifier).
        epochs_ae, epochs_gan, batch_size: training schedule of both phases.
        epsilons: the ε sweep of the identity-noise release (the paper sweeps 0.01 .. 1).
        ablation_epsilon: the ε at which the ablation without the auxiliary classifier is also judged by the real
            recognisers and listed in the IS/FID table.
        baseline_epsilons: ε values of the published-noise-only baseline (metric-DP noise on the whole latent) that
            the real recognisers judge.
        judge_images_per_identity: test images per identity the real recognisers (``faceres``, dlib) see per
            release; the originals of those images are the gallery.
        judge_epsilons: ε values of the method the real recognisers see (all of them are judged by the model's
            identity encoder).
        judge_centre_identities: training identities (one image each) whose mean descriptor centres each real
            recogniser's space (their raw descriptors are not centred).
        grid_columns: faces shown in the samples figure.
        far: target false-accept rate of re-identification (raised to the smallest resolvable FAR when needed).
        n_bootstrap: bootstrap replicates of identity-distance and age-error CIs.
        fid_images_per_identity: images per identity in each FID/IS row (published faces) and per training identity
            in the FID reference set (real training faces).
        fid_input_size: side at which ``efficientnet-lite0`` sees the faces for FID/IS (224 is its training
            resolution; 128 costs a third of the time on a CPU; the paper scale uses Inception-v3 at 299).
        fid_bootstrap: bootstrap replicates of the FID and IS CIs.
        is_splits: Inception-Score splits.
        probe_attributes: embedded attributes judged for preservation by the pixel probe (``()``: all of the face
            set's).
    """

    face_set: str
    n_train_identities: int
    n_test_identities: int
    images_per_identity: int
    image_size: int
    render_size: int
    align_margin: float | None
    width: int
    id_dim: int
    att_dim: int
    linear_path: bool
    clip_norm: float | None
    lambda_id: float
    noise_prob: float
    lambda_cls: float
    epochs_ae: int
    epochs_gan: int
    batch_size: int
    epsilons: tuple[float, ...]
    ablation_epsilon: float
    baseline_epsilons: tuple[float, ...]
    judge_images_per_identity: int
    judge_epsilons: tuple[float, ...]
    judge_centre_identities: int
    grid_columns: int
    far: float
    n_bootstrap: int
    fid_images_per_identity: int
    fid_input_size: int
    fid_bootstrap: int
    is_splits: int
    probe_attributes: tuple[str, ...]


_EPS = (0.01, 0.03, 0.1, 0.3, 1.0)

SMOKE = SynthesisNetPreset(
    face_set="portraits-views", n_train_identities=8, n_test_identities=4, images_per_identity=3, image_size=32,
    render_size=64, align_margin=0.1, width=8, id_dim=8, att_dim=8, linear_path=True, clip_norm=None, lambda_id=0.3,
    noise_prob=0.5, lambda_cls=1.0, epochs_ae=1, epochs_gan=1, batch_size=32, epsilons=(0.01, 0.1, 1.0),
    ablation_epsilon=0.1, baseline_epsilons=(0.01,), judge_images_per_identity=1, judge_epsilons=(0.01, 1.0),
    judge_centre_identities=3, grid_columns=4, far=1e-1, n_bootstrap=50, fid_images_per_identity=1,
    fid_input_size=64, fid_bootstrap=20, is_splits=2, probe_attributes=("lighting", "flipped"))
DEFAULT = SynthesisNetPreset(
    face_set="portraits-views", n_train_identities=400, n_test_identities=60, images_per_identity=6,
    image_size=64, render_size=128, align_margin=0.1, width=16, id_dim=256, att_dim=8, linear_path=True,
    clip_norm=1280.0, lambda_id=0.3, noise_prob=0.5, lambda_cls=10.0, epochs_ae=3, epochs_gan=8, batch_size=64,
    epsilons=_EPS, ablation_epsilon=0.1, baseline_epsilons=(0.01, 0.1, 1.0), judge_images_per_identity=2,
    judge_epsilons=_EPS, judge_centre_identities=50,
    grid_columns=8, far=1e-2, n_bootstrap=500, fid_images_per_identity=2, fid_input_size=128, fid_bootstrap=200,
    # "background" is not judged: in the aligned crops only the corners show background [I].
    is_splits=10, probe_attributes=("lighting", "occluded", "blur", "pose", "flipped"))
PAPER = SynthesisNetPreset(
    face_set="celeba", n_train_identities=4000, n_test_identities=1000, images_per_identity=20, image_size=128,
    render_size=128, align_margin=None, width=64, id_dim=256, att_dim=256, linear_path=False, clip_norm=None,
    lambda_id=0.3, noise_prob=0.5, lambda_cls=1.0, epochs_ae=50, epochs_gan=50, batch_size=64,
    epsilons=(0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0), ablation_epsilon=0.1, baseline_epsilons=(0.01, 0.1, 1.0),
    judge_images_per_identity=2, judge_epsilons=(0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0), judge_centre_identities=500,
    grid_columns=8, far=1e-3, n_bootstrap=1000, fid_images_per_identity=20, fid_input_size=224, fid_bootstrap=0,
    is_splits=10, probe_attributes=("Smiling", "Male", "Eyeglasses", "Young", "Wearing_Hat", "Blond_Hair"))

ARTEFACTS = (
    ("fig1_samples", "originals, reconstructions, published faces at several epsilon and the classical baselines"),
    ("fig3_identity_vs_epsilon", "identity distance, rank-1 and TAR@FAR re-identification vs epsilon under faceres, "
                                 "dlib and the model's own encoder, baselines as references (paper Fig. 3)"),
    ("table2_is_fid", "FID and an IS analogue in efficientnet-lite0 space with bootstrap CIs (paper Table 2; its "
                      "values could not be obtained)"),
    ("fig4_attributes_vs_epsilon", "attribute preservation vs epsilon: faceres gender/age heads and a probe of the "
                                   "embedded attributes trained on real faces (privkit)"),
    ("table3_ablations", "ablations: no DP noise, no auxiliary classifier, and the published-noise-only baseline "
                         "(metric-DP noise on the whole latent) (privkit)"),
    ("fig5_epsilon_meaning", "distribution of epsilon * d(z, z') over pairs of identities (privkit)"),
    ("table4_guarantees", "the privacy guarantee of every release (privkit)"),
    ("table5_claims", "the closing checks: every claim at this scale, whether it holds and whether it is enforced "
                      "(privkit)"),
)

#: The paper path (CelebA with its attributes from ``--data-root``) at smoke sizes, on the rehearsal root that
#: ``python -m privkit rehearsal-root`` writes: every paper branch runs, the numbers mean nothing.
REHEARSAL = replace(SMOKE, face_set="celeba", n_train_identities=12, n_test_identities=6, images_per_identity=4,
                    render_size=32, align_margin=None, linear_path=PAPER.linear_path, clip_norm=PAPER.clip_norm,
                    probe_attributes=("Blurry", "Male"))
PRESETS = {"smoke": SMOKE, "default": DEFAULT, "paper": PAPER, "rehearsal": REHEARSAL}
