"""Tests of privkit.scoreshield.rag (the DP-RAG retrieval rule and recall), the DP-RAG study and its benchmark."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from privkit.data.rag_corpus import CHUNKS, QUERIES, rag_benchmark
from privkit.errors import InvalidArgumentError, NotUnitNormError, ShapeError
from privkit.privacy import make_generator
from privkit.studies.scoreshield import experiments as X
from privkit.scoreshield.rag import (
    PAPER_RETRIEVAL_SETTINGS,
    RETRIEVAL_NOT_COVERED,
    gold_mask,
    private_retrieve,
    random_retrieval_recall,
    retrieval_recall,
    retrieve,
    retrieved_count,
)
from privkit.scoreshield.release import SCORE_NEIGHBOURING, SCORE_PROTECTS, release_scores


def unit(n: int, d: int, seed: int = 0) -> torch.Tensor:
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return x / x.norm(dim=1, keepdim=True)


# ------------------------------------------------------------------------------------------------ the rule
def test_ties_are_broken_by_the_lower_index():
    s = torch.tensor([0.5, 0.9, 0.5, 0.9, 0.5, 1.0], dtype=torch.float64)
    assert retrieve(s, tau=0.0, k=4).tolist() == [5, 1, 3, 0]
    # many exact ties at the clip value +1, as heavy noise produces
    s = torch.tensor([1.0, -1.0, 1.0, 1.0, 0.2, 1.0], dtype=torch.float64)
    assert retrieve(s, tau=0.25, k=3).tolist() == [0, 2, 3]


def test_ties_by_index_on_a_large_tied_vector():
    s = torch.ones(5000, dtype=torch.float64)
    s[::7] = 0.0
    got = retrieve(s, tau=0.5, k=50)
    want = [i for i in range(5000) if i % 7][:50]
    assert got.tolist() == want


def test_tau_filter_keeps_scores_at_or_above_tau_and_pads():
    s = torch.tensor([0.10, 0.35, 0.349999, 0.80, 0.20], dtype=torch.float64)
    got = retrieve(s, tau=0.35, k=5)
    assert got.tolist() == [3, 1, -1, -1, -1]  # 0.35 itself is kept (>=), 0.349999 is not
    assert retrieved_count(got).tolist() == [2]
    assert retrieve(s, tau=1.0, k=3).tolist() == [-1, -1, -1]
    assert retrieve(s, tau=-1.0, k=5).tolist() == [3, 1, 2, 4, 0]


def test_k_caps_the_number_retrieved_and_k_above_n_pads():
    s = torch.linspace(1, -1, 30, dtype=torch.float64)
    assert retrieve(s, tau=-1.0, k=7).tolist() == list(range(7))
    got = retrieve(s[:4], tau=-1.0, k=10)
    assert got.shape == (10,) and got.tolist() == [0, 1, 2, 3] + [-1] * 6


def test_batched_rows_are_independent_and_match_single_rows():
    S = torch.rand(6, 40, generator=torch.Generator().manual_seed(3), dtype=torch.float64) * 2 - 1
    R = retrieve(S, tau=0.25, k=10)
    assert R.shape == (6, 10) and R.dtype == torch.int64
    for i in range(6):
        assert torch.equal(R[i], retrieve(S[i], tau=0.25, k=10))


def test_float32_scores_work():
    s = torch.tensor([0.3, 0.7, 0.7], dtype=torch.float32)
    assert retrieve(s, tau=0.25, k=2).tolist() == [1, 2]


@pytest.mark.parametrize("kwargs,err,match", [
    ({"tau": 1.5, "k": 3}, InvalidArgumentError, r"tau must lie in \[-1, 1\]"),
    ({"tau": -1.01, "k": 3}, InvalidArgumentError, "tau"),
    ({"tau": float("nan"), "k": 3}, InvalidArgumentError, "tau"),
    ({"tau": 0.3, "k": 0}, InvalidArgumentError, "k"),
    ({"tau": 0.3, "k": 2.5}, InvalidArgumentError, "k"),
    ({"tau": 0.3, "k": True}, InvalidArgumentError, "k"),
])
def test_bad_rule_parameters(kwargs, err, match):
    with pytest.raises(err, match=match):
        retrieve(torch.zeros(4, dtype=torch.float64), **kwargs)


def test_bad_scores():
    with pytest.raises(InvalidArgumentError, match="NaN"):
        retrieve(torch.tensor([0.1, float("nan")]), tau=0.0, k=1)
    with pytest.raises(InvalidArgumentError, match="floating"):
        retrieve(torch.tensor([1, 0]), tau=0.0, k=1)
    with pytest.raises(ShapeError, match="dimensions"):
        retrieve(torch.zeros(2, 2, 2), tau=0.0, k=1)
    with pytest.raises(ShapeError, match="at least one chunk"):
        retrieve(torch.zeros(3, 0), tau=0.0, k=1)
    with pytest.raises(InvalidArgumentError, match="torch.Tensor"):
        retrieve([0.1, 0.2], tau=0.0, k=1)


# ------------------------------------------------------------------------------------------------ recall
def test_recall_counts_gold_hits_per_query():
    G = gold_mask([[0, 3], [2], [1, 4, 5]], 6)
    R = torch.tensor([[3, 1, -1], [0, 1, 4], [5, 4, 1]])
    assert retrieval_recall(R, G).tolist() == [0.5, 0.0, 1.0]
    assert retrieved_count(R).tolist() == [2, 3, 3]
    # single query, and a repeated index counts once
    assert retrieval_recall(torch.tensor([0, 0, -1]), G[0]).tolist() == [0.5]
    # padding never counts, even where index 0 is gold
    assert retrieval_recall(torch.tensor([-1, -1]), G[0]).tolist() == [0.0]


def test_recall_end_to_end_on_clean_scores():
    s = torch.tensor([[0.9, 0.1, 0.5, 0.4], [0.2, 0.3, 0.1, 0.0]], dtype=torch.float64)
    G = gold_mask([[2, 3], [0]], 4)
    R = retrieve(s, tau=0.35, k=2)
    assert R.tolist() == [[0, 2], [-1, -1]]
    assert retrieval_recall(R, G).tolist() == [0.5, 0.0]


def test_recall_and_gold_errors():
    G = gold_mask([[0], [1]], 3)
    with pytest.raises(ShapeError, match="queries"):
        retrieval_recall(torch.tensor([[0, 1]]), G)
    with pytest.raises(InvalidArgumentError, match="integer"):
        retrieval_recall(torch.tensor([[0.0], [1.0]]), G)
    with pytest.raises(InvalidArgumentError, match=r"\[-1, 2\]"):
        retrieval_recall(torch.tensor([[3], [0]]), G)
    with pytest.raises(InvalidArgumentError, match="no gold"):
        retrieval_recall(torch.tensor([[0], [1]]), torch.zeros(2, 3, dtype=torch.bool))
    with pytest.raises(InvalidArgumentError, match="bool mask"):
        retrieval_recall(torch.tensor([[0], [1]]), G.long())
    with pytest.raises(InvalidArgumentError, match=r"gold\[1\]"):
        gold_mask([[0], []], 3)
    with pytest.raises(InvalidArgumentError, match=r"integers in \[0, 2\]"):
        gold_mask([[0], [3]], 3)
    with pytest.raises(InvalidArgumentError, match="non-empty"):
        gold_mask([], 3)
    assert random_retrieval_recall(240, 10) == pytest.approx(10 / 240)
    assert random_retrieval_recall(5, 10) == 1.0


# ------------------------------------------------------------------------------------------------ the DP release
def test_private_retrieve_uses_the_dp_score_release_and_its_guarantee():
    C, Q = unit(60, 16, seed=1), unit(4, 16, seed=2)
    kw = {"epsilon": 20.0, "delta": 1e-4, "calibration": "scoreshield"}
    pr = private_retrieve(Q, C, tau=0.25, k=5, generator=make_generator(7), accounting="per_query", **kw)
    ref = release_scores(Q, C, generator=make_generator(7), accounting="per_query", **kw)
    # by default the guarantee covers the 4 questions this call releases together, not one of them
    joint = private_retrieve(Q, C, tau=0.25, k=5, generator=make_generator(7), **kw)
    assert joint.release.accounting == "joint" and joint.guarantee.event.count == 4
    # the rule was applied to exactly the DP release (same noise), and nothing else
    assert torch.equal(pr.release.scores, ref.scores)
    assert torch.equal(pr.indices, retrieve(ref.scores, tau=0.25, k=5))
    # the guarantee is the release's: same (eps, delta), relation, what it protects, mechanism ...
    for f in ("epsilon", "delta", "neighbours", "neighbouring", "protects", "event", "mechanism", "accountant",
              "requested_epsilon", "requested_delta"):
        assert getattr(pr.guarantee, f) == getattr(ref.guarantee, f), f
    nb = pr.guarantee.neighbours
    assert (nb.relation, nb.unit, nb.bound) == (SCORE_NEIGHBOURING.relation, SCORE_NEIGHBOURING.unit, 2.0)
    assert pr.guarantee.protects == SCORE_PROTECTS
    assert "each query row separately" in nb.detail
    # ... with the paper's sigma at Delta = 2, the delta that truly holds, and what it does not cover
    assert pr.release.sigma == pytest.approx(2.0 * math.sqrt(2.0 * math.log(2.0 / 1e-4)) / 20.0, rel=1e-12)
    assert pr.release.sensitivity == 2.0
    assert pr.guarantee.delta == pytest.approx(8.6e-3, rel=0.01) and not pr.guarantee.meets_request
    assert pr.guarantee.notes[:-1] == ref.guarantee.notes and pr.guarantee.notes[-1] == RETRIEVAL_NOT_COVERED
    assert "NOT covered" in str(pr.guarantee)
    assert dataclasses.replace(pr.guarantee, notes=ref.guarantee.notes) == ref.guarantee


def test_private_retrieve_analytic_meets_request_and_validates():
    C, Q = unit(30, 8, seed=3), unit(2, 8, seed=4)
    pr = private_retrieve(Q, C, tau=0.35, k=20, epsilon=1.0, delta=1e-5, calibration="analytic",
                          generator=make_generator(0))
    assert pr.guarantee.meets_request and pr.indices.shape == (2, 20)
    with pytest.raises(NotUnitNormError):
        private_retrieve(Q * 2, C, tau=0.35, k=20, epsilon=1.0, delta=1e-5)
    with pytest.raises(InvalidArgumentError, match="tau"):
        private_retrieve(Q, C, tau=2.0, k=20, epsilon=1.0, delta=1e-5)


def test_noise_destroys_retrieval_at_small_epsilon_and_not_at_large():
    C = unit(200, 32, seed=5)
    Q = C[::10].clone()  # each query is its own gold chunk (spread over the indices): clean recall 1
    gold = [[i] for i in range(0, 200, 10)]
    df = X.dp_rag_retrieval(Q, C, gold, settings=[(0.25, 10)], privacy=[(1.0, 1e-5), (1000.0, 1e-5)], repeats=5,
                            n_boot=200, calibrations=("scoreshield",))
    r = df.set_index("epsilon").recall
    assert r[math.inf] == 1.0
    assert r[1000.0] == 1.0
    assert r[1.0] < 0.2  # near the k/n = 0.05 of knowing nothing
    row = df[df.epsilon == 1.0].iloc[0]
    assert row.recall_low <= row.recall <= row.recall_high and row.n_retrieved == 10
    assert row.recall_random == pytest.approx(10 / 200)
    assert row.true_delta < 1e-5  # eps < 1-ish regime: the paper's sigma is valid here


def test_heavy_noise_ties_at_plus_one_favour_low_indices():
    # Why the benchmark's chunk order is a fixed permutation: at sigma ~ 10 about half the released scores clip to
    # exactly +1, and the rule's tie-break hands the top-k to the lowest indices among them.
    C = unit(200, 32, seed=5)
    Q = C[:20].clone()
    pr = private_retrieve(Q, C, tau=0.25, k=10, epsilon=1.0, delta=1e-5, generator=make_generator(1))
    assert float((pr.release.scores == 1.0).double().mean()) > 0.4
    assert int(pr.indices.max()) < 60  # nothing beyond the first few dozen indices is ever retrieved


def test_study_is_seeded_and_checks_inputs():
    C, Q = unit(50, 8, seed=6), unit(5, 8, seed=7)
    gold = [[0], [1, 2], [3], [4], [5]]
    kw = {"settings": PAPER_RETRIEVAL_SETTINGS, "privacy": [(10.0, 1e-5)], "repeats": 2, "n_boot": 50}
    a, b = X.dp_rag_retrieval(Q, C, gold, seed=3, **kw), X.dp_rag_retrieval(Q, C, gold, seed=3, **kw)
    assert a.equals(b)
    assert set(a.calibration) == {"none", "scoreshield", "analytic"} and len(a) == 3 * 3
    with pytest.raises(InvalidArgumentError, match="questions"):
        X.dp_rag_retrieval(Q, C, gold[:4], **kw)
    with pytest.raises(NotUnitNormError):
        X.dp_rag_retrieval(Q * 3, C, gold, **kw)


def test_bootstrap_mean():
    m, lo, hi = X.bootstrap_mean(torch.tensor([0.0, 1.0] * 50), n_boot=500, seed=0)
    assert m == 0.5 and lo < 0.5 < hi and hi - lo < 0.3
    assert X.bootstrap_mean([1.0, 1.0, 1.0], n_boot=20) == (1.0, 1.0, 1.0)
    with pytest.raises(InvalidArgumentError):
        X.bootstrap_mean([], n_boot=20)


def test_paper_table_matches_its_main_text_rows():
    t = X.paper_dprag_table()
    assert len(t) == 47 and set(zip(t.tau, t.k)) == set(PAPER_RETRIEVAL_SETTINGS)
    clean = t[(t.generator == "Gemma3-27B") & (t.epsilon == math.inf)].iloc[0]
    assert (clean.tau, clean.k, clean.rag_accuracy, clean.base_accuracy) == (0.35, 20, 60.92, 40.17)
    assert clean.rag_gain == pytest.approx(20.75)
    dp = t[(t.generator == "Q3-8B") & (t.epsilon == 10) & (t.delta == 1e-6)].iloc[0]
    assert dp.rag_gain == pytest.approx(0.61)


# ------------------------------------------------------------------------------------------------ the benchmark
def test_rag_benchmark_shape_and_gold():
    b = rag_benchmark()
    assert len(b.chunks) == sum(len(c) for c in CHUNKS.values()) == 240
    assert len(b.queries) == len(QUERIES) == 50
    assert len({c.id for c in b.chunks}) == 240
    assert all(1 <= len(g) <= 3 for g in b.gold)
    for q, g in zip(b.queries, b.gold):
        assert all(b.chunk_topics[j] == q.topic for j in g)  # gold chunks come from the question's own topic
        assert [b.chunks[j].id for j in g] == list(q.gold)
    # each question's topic also holds distractors
    for topic, chunks in CHUNKS.items():
        golds = {g for q in QUERIES if q.topic == topic for g in q.gold}
        assert len(chunks) - len(golds) >= 15
    # a fixed order, not topic by topic
    assert rag_benchmark() == b
    assert b.chunk_topics[:24] != (b.chunk_topics[0],) * 24
    assert b.chunk_texts()[0].startswith(b.chunks[0].title + ": ")
