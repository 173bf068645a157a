"""Scale presets and artefacts of the ScoreShield notebook (``notebooks/scoreshield.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import register_presets


@dataclass(frozen=True)
class ScoreShieldConfig:
    """Everything the scale decides in the ScoreShield notebook.

    Attributes:
        face_set: embedded face set for regime (i) verification ("lfw-subset-views" | "synthfaces"); at the paper
            scale the LFW pairs from ``data_root`` are used instead.
        n_identities, images_per_identity: size of the face set.
        face_size: image side in pixels.
        scaling_ns: collection sizes n for the error-scaling figure (paper Fig. 2).
        scaling_repeats: repeats per n.
        verification_epsilons: the paper's ε grid for Table 1 / H.1; ``verification_delta``: its δ.
        verification_repeats: noise draws per ε.
        images_per_template: images pooled into one template in the IJB-style template protocol built on the
            embedded (or LFW) faces.
        ijb_sets: IJB protocols read from ``data_root`` at the paper scale ("IJBB", "IJBC"; a missing one is skipped
            with a message saying where to get it).
        op_scores: synthetic scores per side in the operating-point study (the paper: 200,000).
        op_epsilons, op_deltas, op_alphas: its grid.
        gram_n: collection size for Gram analytics; gram_epsilons, gram_delta_gs, gram_delta: its grid;
        gram_repeats: repeats; gram_projections: which projections to compare ("none", "clip", "aap", "nearest";
            AAP runs up to the paper's 500 sweeps, so the smoke scale leaves it out).
        ratings_users, ratings_items: synthetic ratings matrix size; recommender_k: neighbours.
        solver_ns: sizes for the solver comparison.
        audit_samples: samples per neighbour in the empirical audits.
        n_boot: bootstrap replicates for confidence intervals.
    """

    face_set: str
    n_identities: int
    images_per_identity: int
    face_size: int
    scaling_ns: tuple[int, ...]
    scaling_repeats: int
    verification_epsilons: tuple[float, ...]
    verification_delta: float
    verification_repeats: int
    images_per_template: int
    ijb_sets: tuple[str, ...]
    op_scores: int
    op_epsilons: tuple[float, ...]
    op_deltas: tuple[float, ...]
    op_alphas: tuple[float, ...]
    gram_n: int
    gram_epsilons: tuple[float, ...]
    gram_delta_gs: tuple[float, ...]
    gram_delta: float
    gram_repeats: int
    gram_projections: tuple[str, ...]
    ratings_users: int
    ratings_items: int
    recommender_k: int
    solver_ns: tuple[int, ...]
    audit_samples: int
    n_boot: int


_PAPER_EPS = (15.0, 20.0, 25.0, 30.0, 35.0, 70.0, 100.0)
_OP_EPS = (0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 10.0, 15.0, 20.0, 30.0, 40.0)

SMOKE = ScoreShieldConfig(
    face_set="lfw-subset-views", n_identities=12, images_per_identity=4, face_size=64,
    scaling_ns=(8, 16, 32), scaling_repeats=1,
    verification_epsilons=(20.0, 100.0), verification_delta=1e-4, verification_repeats=1,
    images_per_template=2, ijb_sets=(),
    op_scores=20_000, op_epsilons=(5.0, 20.0, 40.0), op_deltas=(1e-5,), op_alphas=(1e-2,),
    gram_n=40, gram_epsilons=(10.0, 100.0), gram_delta_gs=(2.0,), gram_delta=1e-8, gram_repeats=1,
    gram_projections=("none", "clip", "nearest"),
    ratings_users=60, ratings_items=150, recommender_k=10,
    solver_ns=(40,), audit_samples=100_000, n_boot=50,
)
DEFAULT = ScoreShieldConfig(
    face_set="lfw-subset-views", n_identities=100, images_per_identity=12, face_size=64,
    scaling_ns=(16, 32, 64, 128, 256, 512), scaling_repeats=3,
    verification_epsilons=_PAPER_EPS, verification_delta=1e-4, verification_repeats=3,
    images_per_template=3, ijb_sets=(),
    op_scores=200_000, op_epsilons=_OP_EPS, op_deltas=(1e-8, 1e-6, 1e-5), op_alphas=(1e-2, 1e-3),
    gram_n=128, gram_epsilons=(1.0, 10.0, 100.0, 1000.0), gram_delta_gs=(0.5, 2.0), gram_delta=1e-8,
    gram_repeats=3, gram_projections=("none", "clip", "aap", "nearest"),
    ratings_users=200, ratings_items=500, recommender_k=20,
    solver_ns=(100, 250, 500), audit_samples=400_000, n_boot=200,
)
PAPER = ScoreShieldConfig(
    face_set="lfw", n_identities=5749, images_per_identity=0, face_size=112,
    scaling_ns=(16, 32, 64, 128, 256, 512, 1024, 2048), scaling_repeats=5,
    verification_epsilons=_PAPER_EPS, verification_delta=1e-4, verification_repeats=5,
    images_per_template=3, ijb_sets=("IJBB", "IJBC"),
    op_scores=200_000, op_epsilons=_OP_EPS, op_deltas=(1e-8, 1e-6, 1e-5), op_alphas=(1e-2, 1e-3),
    gram_n=943, gram_epsilons=(0.1, 1.0, 10.0, 100.0), gram_delta_gs=(0.5, 1.0, 2.0), gram_delta=1e-8,
    gram_repeats=5, gram_projections=("none", "clip", "aap", "nearest"),
    ratings_users=943, ratings_items=1682, recommender_k=20,
    solver_ns=(500, 1000, 2000), audit_samples=1_000_000, n_boot=1000,
)

ARTEFACTS = (
    ("tableC1_calibration", "the paper's sigma vs the analytic sigma* and the delta that truly holds (docs/scoreshield.md §5)"),
    ("fig2_error_scaling", "MSE/c of naive vs projected releases against n, both regimes and adjacencies (paper Fig. 2)"),
    ("table1_dp_verification", "DP face verification: accuracy and TAR@FAR with/without recalibration (paper Table 1 / H.1)"),
    ("table1b_template_verification", "DP template verification, IJB-style pooling (paper Table 1, IJB-B/C columns)"),
    ("figG1_roc_shift", "ROC/AUC/EER shift against the O(sigma) bound (paper App. G)"),
    ("figG2_flip_probability", "decision-flip probability, closed form vs measured (paper App. G)"),
    ("tableG2_pair_flip_rate", "decision-flip rate over the verification pairs, closed form vs measured (paper App. G)"),
    ("tableG1_operating_points", "operating-point study on the synthetic score families (paper App. G/H)"),
    ("figG3_operating_points", "TPR after recalibration vs epsilon per family (paper App. G/H)"),
    ("fig5_gram_analytics", "NMI / Recall@1 / pair AUC from the private Gram, naive vs AAP vs nearest (paper Fig. 5, K.*)"),
    ("fig5b_recommender", "neighbour-recommender RMSE from a private user Gram (paper Fig. K.*)"),
    ("tableS1_solvers", "AAP vs Dykstra vs Newton vs one-eigh clipping (privkit)"),
    ("tableA1_audits", "empirical privacy audits with negative controls (privkit)"),
)

register_presets("scoreshield", {"smoke": SMOKE, "default": DEFAULT, "paper": PAPER}, artefacts=ARTEFACTS)
