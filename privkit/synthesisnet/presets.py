"""Scale presets and artefacts of the SynthesisNet notebook (``notebooks/synthesisnet.py``).

Every number here is privkit's choice [I]: the paper's full text (and so its schedule, latent sizes and data
splits) could not be obtained.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import register_presets


@dataclass(frozen=True)
class SynthesisNetPreset:
    """Everything the scale decides in the SynthesisNet notebook.

    Attributes:
        face_set: ``"lfw-subset-views"`` or ``"synthfaces"`` (embedded), or ``"celeba"`` (paper scale, read from
            ``data_root``).
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
        att_dim: size of the attribute latent ``z_att``, which is published WITHOUT noise (the metric-DP guarantee
            covers ``z_id`` only), so it must carry as little identity as possible [I]. The default scale uses 8:
            its attributes are five or six discrete labels, and the size of ``z_att`` is the bottleneck that decides
            how much identity it can carry. privkit measured it on the 300 test faces (30 unseen identities),
            autoencoder only, 40 epochs, everything else at the default (leave-one-out nearest-neighbour rank-1 of
            ``z_att``, chance 0.030; then the model's own identity encoder on ``Dec(random z_id, z_att)``, the
            ε -> 0 limit of a release, against the originals, chance 0.033): att_dim 64 -> 0.123 / 0.053,
            32 -> 0.087 / 0.040, 16 -> 0.087 / 0.037, 8 -> 0.037 / 0.023 (``z_id``: 0.19 - 0.22 throughout, the
            reconstruction L1 0.14 - 0.15 throughout; the attribute heads' training accuracy falls from 0.97 to
            0.82). With 64 the GAN release at ε = 0.01 was still linked above chance by the model's own identity
            encoder (20/300, 99% chance interval up to 19/300). The gradient-reversal identity adversary
            (``lambda_adv = 1``) was kept as it is: at every size its accuracy on training identities was already
            at chance (0.02 - 0.06), i.e. it no longer sees the identity that a nearest-neighbour attacker on
            unseen identities still finds, so a smaller latent, not a stronger adversary, was the fix.
            Full default runs: with 8 the re-identification checks pass (own encoder 19/300 at ε = 0.01, the top of
            its chance interval; dlib 1/60) and dlib keeps noise-free identity (5.0x / 3.0x chance), but at ε = 0.01
            the attribute probe read lighting (0.347) and occlusion (0.723) at their majority rates (0.353 / 0.737)
            while the generator was trained on encoder outputs only; 16 did no better there (lighting 0.350) and its
            no-noise release lost dlib identity (rank-1 0.05). Training the GAN on privatised latents
            (``noise_prob``) with a stronger attribute term (``lambda_cls`` 5) and 10 GAN epochs lifted ε = 0.01 to
            lighting 0.407 / occlusion 0.767 / flip 0.69 (majority 0.353 / 0.737 / 0.5), at the price of a little
            identity through ``z_att``: the own encoder then linked 22/300 at ε = 0.01 (dlib still 1/60).
            The paper scale keeps 256 (CelebA: 40 attribute labels); check the notebook's latent-leakage table there.
        lambda_id: weight of the identity-classification loss on ``z_id`` in the autoencoder phase. privkit's
            choice 0.3 (with ``id_dim = 64``): with weight 1 and ``id_dim = 16`` the identity latent collapsed onto
            the 70 training identities (a 70-way code), the decoder rendered an average face for unseen
            identities and dlib recognised no reconstruction; a larger, less class-bound latent lets the
            reconstruction terms put a description of the face into ``z_id``.
        noise_prob: share of GAN training samples whose identity latent is privatised as at publishing time (ε
            log-uniform in 0.01 .. 1), see :class:`~privkit.synthesisnet.SynthesisNetConfig`. privkit's choice 0.5
            [I]: trained on encoder outputs only, the generator rendered the nearly random identity latents of
            small ε as colour noise, and the attribute probe fell to its majority rates at ε = 0.01.
        lambda_cls: weight of the auxiliary attribute-classification term of the GAN (generator and classifier).
        epochs_ae, epochs_gan, batch_size: training schedule of both phases.
        epsilons: the ε sweep of the identity-noise release (the paper sweeps 0.01 .. 1).
        ablation_epsilon: the ε at which the ablations are also judged by dlib and listed in the IS/FID table.
        dlib_images_per_identity: test images per identity the (slow) dlib judge sees per release.
        dlib_epsilons: ε values the dlib judge sees (others are judged by the model's identity encoder only).
        dlib_centre_identities: training identities (one image each) whose mean dlib descriptor centres the dlib
            judge's space.
        grid_columns: faces shown in the samples figure.
        far: target false-accept rate of re-identification (raised to the smallest resolvable FAR when needed).
        n_bootstrap: bootstrap replicates of identity-distance CIs.
        fid_bootstrap: bootstrap replicates of FID CIs.
        is_attribute: attribute whose probe's softmax stands in for Inception's class probabilities (embedded
            scales; the paper scale uses Inception-v3 from ``data_root``).
        is_splits: Inception-Score splits.
        probe_attributes: attributes judged for preservation (``()``: all of the face set's).
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
    lambda_id: float
    noise_prob: float
    lambda_cls: float
    epochs_ae: int
    epochs_gan: int
    batch_size: int
    epsilons: tuple[float, ...]
    ablation_epsilon: float
    dlib_images_per_identity: int
    dlib_epsilons: tuple[float, ...]
    dlib_centre_identities: int
    grid_columns: int
    far: float
    n_bootstrap: int
    fid_bootstrap: int
    is_attribute: str
    is_splits: int
    probe_attributes: tuple[str, ...]


_EPS = (0.01, 0.03, 0.1, 0.3, 1.0)

SMOKE = SynthesisNetPreset(
    face_set="lfw-subset-views", n_train_identities=8, n_test_identities=3, images_per_identity=3, image_size=32,
    render_size=64, align_margin=0.1,
    width=8, id_dim=8, att_dim=8, lambda_id=0.3, noise_prob=0.5, lambda_cls=1.0, epochs_ae=1, epochs_gan=1,
    batch_size=32,
    epsilons=(0.01, 0.1, 1.0), ablation_epsilon=0.1, dlib_images_per_identity=1, dlib_epsilons=(0.01,),
    dlib_centre_identities=3,
    grid_columns=4, far=1e-2, n_bootstrap=50, fid_bootstrap=0, is_attribute="lighting", is_splits=2,
    probe_attributes=("lighting", "flipped"),
)
DEFAULT = SynthesisNetPreset(
    face_set="lfw-subset-views", n_train_identities=70, n_test_identities=30, images_per_identity=10,
    image_size=64, render_size=128, align_margin=0.1, width=16, id_dim=64, att_dim=8, lambda_id=0.3, noise_prob=0.5,
    lambda_cls=5.0, epochs_ae=40, epochs_gan=10, batch_size=64,
    epsilons=_EPS, ablation_epsilon=0.1, dlib_images_per_identity=2, dlib_epsilons=_EPS, dlib_centre_identities=70,
    grid_columns=8, far=1e-2, n_bootstrap=500, fid_bootstrap=50, is_attribute="lighting", is_splits=10,
    # "background" is not judged: in the aligned crops only the corners show background (the pixel probe reads it
    # at 0.11 on real faces against a 0.07 majority rate), so it says nothing about preservation [I].
    probe_attributes=("lighting", "occluded", "blur", "pose", "flipped"),
)
PAPER = SynthesisNetPreset(
    face_set="celeba", n_train_identities=4000, n_test_identities=1000, images_per_identity=20, image_size=128,
    render_size=128, align_margin=None,
    width=64, id_dim=256, att_dim=256, lambda_id=0.3, noise_prob=0.5, lambda_cls=1.0, epochs_ae=50, epochs_gan=50,
    batch_size=64,
    epsilons=(0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0), ablation_epsilon=0.1, dlib_images_per_identity=2,
    dlib_epsilons=(0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0), dlib_centre_identities=500, grid_columns=8, far=1e-3,
    n_bootstrap=1000,
    fid_bootstrap=0, is_attribute="", is_splits=10,
    probe_attributes=("Smiling", "Male", "Eyeglasses", "Young", "Wearing_Hat", "Blond_Hair"),
)

ARTEFACTS = (
    ("fig1_samples", "originals, reconstructions, published faces at several epsilon and the classical baselines"),
    ("fig3_identity_vs_epsilon", "identity distance and re-identification vs epsilon, two judges, baselines as "
                                 "references (paper Fig. 3)"),
    ("table2_is_fid", "IS/FID stand-ins per method (paper Table 2; its values could not be obtained)"),
    ("fig4_attributes_vs_epsilon", "attribute preservation vs epsilon, probe trained on real faces (privkit)"),
    ("table3_ablations", "ablations: no DP noise, no auxiliary classifier, noise on the whole latent (privkit)"),
    ("fig5_epsilon_meaning", "distribution of epsilon * d(z, z') over pairs of identities (privkit)"),
    ("table4_guarantees", "the privacy guarantee of every release (privkit)"),
)

register_presets("synthesisnet", {"smoke": SMOKE, "default": DEFAULT, "paper": PAPER}, artefacts=ARTEFACTS)
