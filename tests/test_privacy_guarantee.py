"""PrivacyGuarantee as structured data: the Neighbouring relation, the dp_accounting event, their validation,
and DP-SGD events that reproduce the accountant's epsilon."""

from __future__ import annotations

import json
import math

import pytest
import torch
from dp_accounting import (
    ComposedDpEvent,
    GaussianDpEvent,
    LaplaceDpEvent,
    NeighboringRelation,
    NonPrivateDpEvent,
    PoissonSampledDpEvent,
    SelfComposedDpEvent,
    UnsupportedDpEvent,
)

from privkit.errors import InvalidArgumentError, PrivkitError, UnknownNameError
from privkit.privacy import Neighbouring, PrivacyGuarantee
from privkit.privacy.guarantee import ACCOUNTANT_KINDS, NORMS, RELATIONS, describe_event

REPLACE = Neighbouring(relation="replace-one", unit="one face embedding", bound=2.0, norm="l2")


def _g(**kw) -> PrivacyGuarantee:
    base = dict(epsilon=1.0, delta=1e-5, neighbours=REPLACE, protects="one face embedding",
                event=GaussianDpEvent(3.0), accountant="analytic-gaussian")
    base.update(kw)
    return PrivacyGuarantee(**base)


# ------------------------------------------------------------------------------------------- Neighbouring
def test_neighbouring_kinds_scale_and_accounting_relation():
    assert RELATIONS == ("replace-one", "add-remove-one", "bounded-change", "metric")
    add = Neighbouring(relation="add-remove-one", unit="one training image", bound=1.0, norm="l2")
    gram = Neighbouring(relation="bounded-change", unit="the cosine Gram matrix", bound=2.0, norm="frobenius")
    metric = Neighbouring(relation="metric", unit="one face's identity latent", bound=320.0, norm="l2")
    # noise multipliers are relative to the per-record bound C: replace-one moves the input by 2C
    assert REPLACE.scale == 1.0 and add.scale == 1.0 and gram.scale == 2.0 and metric.scale == 320.0
    assert REPLACE.accounting_relation() is NeighboringRelation.REPLACE_ONE
    assert add.accounting_relation() is NeighboringRelation.ADD_OR_REMOVE_ONE
    assert gram.accounting_relation() is NeighboringRelation.ADD_OR_REMOVE_ONE
    assert metric.is_metric and not REPLACE.is_metric
    assert Neighbouring(relation="add-remove-one", unit="x").scale is None
    assert "substitution" in str(REPLACE) and "ℓ2 sensitivity 2" in str(REPLACE)
    assert "added or removed" in add.describe()
    assert "at most 2 in Frobenius norm" in gram.describe()
    assert "ε per unit of ℓ2 distance" in metric.describe() and "320" in metric.describe()
    assert Neighbouring(relation="replace-one", unit="x", detail="per row").describe().endswith("; per row")


@pytest.mark.parametrize("kw,err,match", [
    (dict(relation="substitution"), UnknownNameError, "relation='substitution' is not known; valid values are: "
                                                      "add-remove-one, bounded-change, metric, replace-one"),
    (dict(bound=-2.0), InvalidArgumentError, "bound must be > 0"),
    (dict(bound=0.0), InvalidArgumentError, "bound must be > 0"),
    (dict(bound=math.nan), InvalidArgumentError, "bound must be finite"),
    (dict(bound=math.inf), InvalidArgumentError, "bound must be finite"),
    (dict(bound="2"), InvalidArgumentError, "bound must be a finite real number"),
    (dict(norm=None), InvalidArgumentError, "norm is required with bound"),
    (dict(norm="linf"), UnknownNameError, "norm='linf' is not known; valid values are: frobenius, l1, l2"),
    (dict(bound=None), InvalidArgumentError, "norm='l2' needs a bound"),
    (dict(relation="bounded-change", bound=None, norm=None), InvalidArgumentError, "bound is required"),
    (dict(relation="metric", bound=None, norm=None), InvalidArgumentError, "bound is required"),
    (dict(unit=""), InvalidArgumentError, "unit must be a non-empty string"),
    (dict(unit=None), InvalidArgumentError, "unit must be a non-empty string"),
    (dict(detail=3), InvalidArgumentError, "detail must be a string"),
])
def test_neighbouring_validation(kw, err, match):
    base = dict(relation="replace-one", unit="one face embedding", bound=2.0, norm="l2")
    base.update(kw)
    with pytest.raises(err, match=match):
        Neighbouring(**base)
    assert issubclass(err, PrivkitError) and issubclass(err, ValueError)


def test_norms_and_accountant_kinds_are_fixed():
    assert NORMS == ("l1", "l2", "frobenius")
    assert ACCOUNTANT_KINDS == ("analytic-gaussian", "opacus-rdp", "opacus-prv", "dp-accounting-pld", "laplace")


# ------------------------------------------------------------------------------------------- events
def test_events_are_rendered_from_their_parameters():
    dpsgd = SelfComposedDpEvent(PoissonSampledDpEvent(0.02, GaussianDpEvent(1.1)), 300)
    add = Neighbouring(relation="add-remove-one", unit="one training image", bound=0.5, norm="l2")
    assert describe_event(dpsgd, add) == ("300 × [Poisson-subsampled (q = 0.02) Gaussian mechanism "
                                          "(noise multiplier 1.1, σ = 0.55)] (composition)")
    both = ComposedDpEvent([GaussianDpEvent(2.0), LaplaceDpEvent(0.5)])
    assert describe_event(both) == ("composition of: [Gaussian mechanism (noise multiplier 2)] + "
                                    "[Laplace mechanism (noise multiplier 0.5)]")
    g = _g(event=dpsgd, neighbours=add, accountant="opacus-rdp", processing=("clip C=0.5",))
    assert g.mechanism == describe_event(dpsgd, add) + "; clip C=0.5; accounted with opacus's RDP accountant"
    assert g.neighbouring == add.describe()
    d = g.to_dict()
    assert d["event"] == {"type": "SelfComposedDpEvent", "count": 300,
                          "event": {"type": "PoissonSampledDpEvent", "sampling_probability": 0.02,
                                    "event": {"type": "GaussianDpEvent", "noise_multiplier": 1.1}}}
    json.dumps(d)  # JSON-serialisable
    assert "non-private" in _g(epsilon=math.inf, delta=1.0, event=NonPrivateDpEvent(), accountant=None).mechanism


@pytest.mark.parametrize("event,match", [
    ("Gaussian mechanism", "event must be a dp_accounting DpEvent instance.*got str"),
    (GaussianDpEvent, "event must be a dp_accounting DpEvent instance.*got GaussianDpEvent"),
    (UnsupportedDpEvent(), "got UnsupportedDpEvent"),
    (PoissonSampledDpEvent(0.1, "Gaussian"), r"event\.event must be a dp_accounting DpEvent"),
    (ComposedDpEvent([GaussianDpEvent(1.0), 3]), r"event\.events\[1\] must be a dp_accounting DpEvent"),
    (PoissonSampledDpEvent(1.5, GaussianDpEvent(1.0)), r"event\.sampling_probability must lie in \[0, 1\]"),
    (GaussianDpEvent(-1.0), r"event\.noise_multiplier must be >= 0"),
    (LaplaceDpEvent(math.nan), r"event\.noise_multiplier must be finite"),
    (SelfComposedDpEvent(GaussianDpEvent(1.0), -1), r"event\.count must be an integer >= 0"),
    (SelfComposedDpEvent(GaussianDpEvent(1.0), 2.5), r"event\.count must be an integer >= 0"),
])
def test_bad_events_are_refused(event, match):
    with pytest.raises(InvalidArgumentError, match=match):
        _g(event=event)


def test_a_non_private_event_cannot_carry_a_finite_epsilon():
    with pytest.raises(InvalidArgumentError, match="NonPrivateDpEvent, so epsilon must be inf"):
        _g(event=NonPrivateDpEvent())
    with pytest.raises(InvalidArgumentError, match="NonPrivateDpEvent"):
        _g(event=ComposedDpEvent([GaussianDpEvent(1.0), NonPrivateDpEvent()]))
    g = _g(epsilon=math.inf, delta=1.0, event=NonPrivateDpEvent(), accountant=None)
    assert not g.is_meaningful


@pytest.mark.parametrize("kw,err,match", [
    (dict(neighbours="replace one face"), InvalidArgumentError, "neighbours must be a privkit.privacy.Neighbouring"),
    (dict(accountant="moments"), UnknownNameError, "accountant='moments' is not known"),
    (dict(processing=(1,)), InvalidArgumentError, "processing must contain only strings"),
])
def test_guarantee_structure_validation(kw, err, match):
    with pytest.raises(err, match=match):
        _g(**kw)


def test_metric_statement_gives_the_per_unit_epsilon():
    metric = Neighbouring(relation="metric", unit="one face's identity latent", bound=320.0, norm="l2")
    g = _g(epsilon=32.0, delta=0.0, neighbours=metric, event=LaplaceDpEvent(1 / 32.0), accountant="laplace")
    assert g.epsilon_per_unit == pytest.approx(0.1) and _g().epsilon_per_unit is None
    assert g.statement() == "(ε=32.00, δ=0)-DP between any two inputs (metric DP: ε=0.10 per unit of distance)"
    assert g.mechanism.startswith("multivariate ℓ2 Laplace mechanism, metric DP (noise multiplier 0.03125, "
                                  "scale 10; ε per unit distance 0.1)")


# ------------------------------------------------------------------------------- DP-SGD: event -> epsilon
def _tiny_pose(n: int, seed: int = 0):
    from privkit.data.types import PoseSet

    g = torch.Generator().manual_seed(seed)
    kp = torch.rand(n, 16, 2, generator=g) * 28 + 2
    return PoseSet(images=torch.rand(n, 3, 32, 32, generator=g), keypoints=kp,
                   visible=torch.ones(n, 16, dtype=torch.bool),
                   head_box=torch.tensor([[4.0, 4.0, 12.0, 12.0]]).repeat(n, 1), identity=torch.arange(n),
                   name="tiny")


@pytest.mark.parametrize("method,accountant", [pytest.param("dpsgd", "rdp", marks=pytest.mark.slow),
                                               pytest.param("dpsgd", "prv", marks=pytest.mark.slow),
                                               pytest.param("dpsgd", "pld", marks=pytest.mark.slow),
                                               ("feature", "pld")])
def test_dpsgd_event_reproduces_the_accountants_epsilon(method, accountant):
    """The guarantee's event, handed to dp_accounting under the relation's NeighboringRelation, gives the
    epsilon privkit's accountant reported (like with like: RDP against RDP at opacus's orders, PLD against
    PLD at privkit's discretisation, PRV against PLD within the PRV accountant's documented error)."""
    from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
    from dp_accounting.rdp import RdpAccountant
    from opacus.accountants import RDPAccountant

    from privkit.dppose.train import DPSpec, Schedule, train
    from privkit.privacy.accounting import PLD_DISCRETIZATION, PRV_EPS_ERROR

    res = train(None, _tiny_pose(64), method=method,
                dp=DPSpec(epsilon=2.0, delta=1e-5, clip=1.0, accountant=accountant),
                schedule=Schedule(batch_size=8, epochs=2), seed=0)
    g = res.guarantee
    assert g.accountant == {"rdp": "opacus-rdp", "prv": "opacus-prv", "pld": "dp-accounting-pld"}[accountant]
    assert g.neighbours.relation == ("replace-one" if method == "feature" else "add-remove-one")
    assert g.neighbours.scale == 1.0  # noise multiplier relative to the clip C = 1
    assert g.event == SelfComposedDpEvent(PoissonSampledDpEvent(res.sample_rate,
                                                                GaussianDpEvent(res.noise_multiplier)), res.steps)
    relation = g.neighbours.accounting_relation()
    pld = PLDAccountant(neighboring_relation=relation, value_discretization_interval=PLD_DISCRETIZATION)
    pld.compose(g.event)
    eps_pld = pld.get_epsilon(g.delta)
    if accountant == "pld":
        assert eps_pld == pytest.approx(g.epsilon, rel=1e-9)
    elif accountant == "prv":
        assert abs(eps_pld - g.epsilon) <= PRV_EPS_ERROR + PLD_DISCRETIZATION
    else:
        rdp = RdpAccountant(orders=RDPAccountant.DEFAULT_ALPHAS, neighboring_relation=relation)
        rdp.compose(g.event)
        assert rdp.get_epsilon(g.delta) == pytest.approx(g.epsilon, rel=1e-4)
        assert eps_pld <= g.epsilon  # RDP is the looser bound
