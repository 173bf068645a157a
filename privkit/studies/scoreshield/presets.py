"""Scale presets and artefacts of the ScoreShield notebook (``notebooks/scoreshield.py``)."""

from __future__ import annotations

from dataclasses import dataclass, replace



@dataclass(frozen=True)
class ScoreShieldConfig:
    """Everything the scale decides in the ScoreShield notebook.

    Attributes:
        face_set: embedded face set for regime (i) verification ("lfw-subset-views" | "synthfaces"); at the paper
            scale the LFW pairs from ``data_root`` are used instead.
        n_identities, images_per_identity: size of the face set (and of every set in ``verification_sets``).
        face_size: image side in pixels.
        face_encoders: the face recognisers Table 1 runs, standing in for the paper's two backbones (IR101 and
            ViT-B): ``"dlib-resnet-fr"`` (also the encoder of every other face study here) and ``"faceres"``.
        verification_sets: the face sets of Table 1's pair and template protocols; ``face_set`` must be among them
            (at the paper scale ``"lfw"``, read from ``data_root``).
        impostor_set: face set of many distinct people, one image each, whose all-pairs scores give the impostor
            side wherever Table 1 estimates false-match rates and recalibrated thresholds (``"portraits"``: 609 real
            people, 185,136 pairs, so FARs down to 10/185,136 ≈ 5.4e-5 are resolvable); ``None`` uses each
            protocol's own impostor pairs.
        impostor_identities: how many of its identities to use (``None``: all).
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
        rag_epsilons, rag_delta: the ε grid (at δ = ``rag_delta``) of the DP-RAG retrieval study (paper Table 2 /
            I.1); the paper's own (ε, δ) settings are always added. rag_repeats: noise draws per setting.
    """

    face_set: str
    n_identities: int
    images_per_identity: int
    face_size: int
    face_encoders: tuple[str, ...]
    verification_sets: tuple[str, ...]
    impostor_set: str | None
    impostor_identities: int | None
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
    rag_epsilons: tuple[float, ...]
    rag_delta: float
    rag_repeats: int


_PAPER_EPS = (15.0, 20.0, 25.0, 30.0, 35.0, 70.0, 100.0)
_OP_EPS = (0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 10.0, 15.0, 20.0, 30.0, 40.0)
_RAG_EPS = (1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)

SMOKE = ScoreShieldConfig(
    face_set="lfw-subset-views", n_identities=12, images_per_identity=4, face_size=64,
    face_encoders=("dlib-resnet-fr",), verification_sets=("lfw-subset-views",), impostor_set="portraits",
    impostor_identities=50, scaling_ns=(8, 16, 32), scaling_repeats=1,
    verification_epsilons=(20.0, 100.0), verification_delta=1e-4, verification_repeats=1,
    images_per_template=2, ijb_sets=(),
    op_scores=20_000, op_epsilons=(5.0, 20.0, 40.0), op_deltas=(1e-5,), op_alphas=(1e-2,),
    gram_n=40, gram_epsilons=(10.0, 100.0), gram_delta_gs=(2.0,), gram_delta=1e-8, gram_repeats=1,
    gram_projections=("none", "clip", "nearest"), ratings_users=60, ratings_items=150, recommender_k=10,
    solver_ns=(40,), audit_samples=100_000, n_boot=50,
    rag_epsilons=(1.0, 10.0, 100.0, 1000.0), rag_delta=1e-5, rag_repeats=3)
DEFAULT = ScoreShieldConfig(
    face_set="lfw-subset-views", n_identities=100, images_per_identity=12, face_size=64,
    face_encoders=("dlib-resnet-fr", "faceres"), verification_sets=("lfw-subset-views", "portraits-views"),
    impostor_set="portraits", impostor_identities=None, scaling_ns=(16, 32, 64, 128, 256, 512), scaling_repeats=3,
    verification_epsilons=_PAPER_EPS, verification_delta=1e-4, verification_repeats=3,
    images_per_template=3, ijb_sets=(),
    op_scores=200_000, op_epsilons=_OP_EPS, op_deltas=(1e-8, 1e-6, 1e-5), op_alphas=(1e-2, 1e-3),
    gram_n=128, gram_epsilons=(1.0, 10.0, 100.0, 1000.0), gram_delta_gs=(0.5, 2.0), gram_delta=1e-8,
    gram_repeats=3, gram_projections=("none", "clip", "aap", "nearest"),
    ratings_users=200, ratings_items=500, recommender_k=20, solver_ns=(100, 250, 500), audit_samples=400_000,
    n_boot=200, rag_epsilons=_RAG_EPS, rag_delta=1e-5, rag_repeats=20)
PAPER = ScoreShieldConfig(
    face_set="lfw", n_identities=5749, images_per_identity=0, face_size=112,
    face_encoders=("dlib-resnet-fr", "faceres"), verification_sets=("lfw",), impostor_set="portraits",
    impostor_identities=None, scaling_ns=(16, 32, 64, 128, 256, 512, 1024, 2048), scaling_repeats=5,
    verification_epsilons=_PAPER_EPS, verification_delta=1e-4, verification_repeats=5,
    images_per_template=3, ijb_sets=("IJBB", "IJBC"),
    op_scores=200_000, op_epsilons=_OP_EPS, op_deltas=(1e-8, 1e-6, 1e-5), op_alphas=(1e-2, 1e-3),
    gram_n=943, gram_epsilons=(0.1, 1.0, 10.0, 100.0), gram_delta_gs=(0.5, 1.0, 2.0), gram_delta=1e-8,
    gram_repeats=5, gram_projections=("none", "clip", "aap", "nearest"),
    ratings_users=943, ratings_items=1682, recommender_k=20, solver_ns=(500, 1000, 2000), audit_samples=1_000_000,
    n_boot=1000, rag_epsilons=_RAG_EPS, rag_delta=1e-5, rag_repeats=50)

ARTEFACTS = (
    ("tableC1_calibration", "the paper's sigma vs the analytic sigma* and the delta that truly holds (docs/scoreshield.md §5)"),
    ("fig2_error_scaling", "MSE/c of naive vs projected releases against n, both regimes and adjacencies (paper Fig. 2)"),
    ("table1_dp_verification", "DP face verification per backbone (dlib, faceres) and face set: accuracy and TAR@FAR with/without recalibration, impostors from portraits (paper Table 1 / H.1, H.2)"),
    ("figT1_dp_verification", "accuracy and recalibrated template TAR against epsilon for both backbones, the paper's IR101 and ViT-B values as markers (paper Table 1)"),
    ("table1b_template_verification", "DP template verification per backbone, IJB-style pooling (paper Table 1, IJB-B/C columns)"),
    ("figG1_roc_shift", "ROC/AUC/EER shift against the O(sigma) bound (paper App. G)"),
    ("figG2_flip_probability", "decision-flip probability, closed form vs measured (paper App. G)"),
    ("tableG2_pair_flip_rate", "decision-flip rate over the verification pairs, closed form vs measured (paper App. G)"),
    ("tableG1_operating_points", "operating-point study on the synthetic score families (paper App. G/H)"),
    ("figG3_operating_points", "FMR floor L(sigma) against alpha, false-match inflation of the kept threshold, TPR after recalibration (paper App. G/H)"),
    ("fig7_dprag_recall", "DP-RAG retrieval: gold-chunk recall and chunks retrieved against epsilon per (tau, k), the paper's accuracy gain as markers (paper Table 2 / I.1)"),
    ("table7_dprag", "the paper's DP-RAG accuracy (Table I.1) beside privkit's retrieval recall at the same (tau, k, epsilon, delta)"),
    ("fig5_gram_analytics", "NMI / Recall@1 / pair AUC from the private Gram, naive vs AAP vs nearest (paper Fig. 5, K.*)"),
    ("fig5b_recommender", "neighbour-recommender RMSE from a private user Gram (paper Fig. K.*)"),
    ("tableS1_solvers", "AAP vs Dykstra vs Newton vs one-eigh clipping (privkit)"),
    ("tableA1_audits", "empirical privacy audits with negative controls (privkit)"),
    ("tableV1_claims", "every claim of the paper the notebook bears on: the paper's number, ours with a 95% interval, and a verdict from the data"),
)

#: The paper path (LFW's pairs and folds, IJB-B and IJB-C, MovieLens from ``--data-root``) at smoke sizes, on the
#: rehearsal root that ``python -m privkit rehearsal-root`` writes: every paper branch runs, the numbers mean nothing.
REHEARSAL = replace(SMOKE, face_set="lfw", n_identities=40, images_per_identity=0, verification_sets=("lfw",),
                    ijb_sets=("IJBB", "IJBC"))
PRESETS = {"smoke": SMOKE, "default": DEFAULT, "paper": PAPER, "rehearsal": REHEARSAL}
