"""The privacy guarantee that accompanies every privkit release, as structured data.

A :class:`PrivacyGuarantee` is an immutable description of what a release
*really* satisfies (the ``epsilon``/``delta`` that hold), next to what the
caller asked for (``requested_epsilon``/``requested_delta``).  The rest is
structured so that code can reason over it:

* :class:`Neighbouring` — the neighbouring relation: its kind (one of
  :data:`RELATIONS`), the unit of privacy (what one record is) and the
  sensitivity ``bound`` with its ``norm``;
* ``event`` — a ``dp_accounting`` :class:`~dp_accounting.DpEvent` describing
  the mechanism (``GaussianDpEvent``, ``SelfComposedDpEvent`` of a
  ``PoissonSampledDpEvent`` for DP-SGD, ``LaplaceDpEvent``, ...), which can be
  handed to a ``dp_accounting`` accountant under
  :meth:`Neighbouring.accounting_relation`;
* ``accountant`` — which computation turned the event into ``epsilon``/``delta``
  (one of :data:`ACCOUNTANT_KINDS`);
* ``processing`` — the public pre-/post-processing around the event.

``neighbouring`` and ``mechanism`` are rendered from that structure; ``protects``
and ``notes`` stay free text.  Notebooks print the guarantee; when the request is
not met (for instance the ScoreShield calibration at large epsilon) its text
says so in capitals.

Conventions (those of ``dp_accounting``).  A noise multiplier is relative to the
per-record norm bound ``C`` (:attr:`Neighbouring.scale`): under add/remove-one the
mechanism's input moves by ``C``, under replace-one by ``2 C`` (the record leaves
and another arrives).  ``bound`` is the sensitivity under the relation, the largest
distance the mechanism's input moves between neighbours: ``C`` for add/remove-one,
``2 C`` for replace-one, the stated distance for bounded-change and metric
relations (which are accounted as a shift by ``bound``, as dp_accounting's
add/remove relation does for an unsampled mechanism).

Metric DP.  A ``"metric"`` relation (d_X-privacy) is not (ε, δ)-DP between
neighbouring datasets: the guarantee is ε per unit of distance between two
inputs, ``epsilon_per_unit``; ``epsilon`` is the indistinguishability of any two
inputs, which are at most ``bound`` apart.  SynthesisNet's multivariate ℓ2
Laplace noise (density ∝ exp(−ε‖n‖₂)) is recorded as a ``LaplaceDpEvent`` whose
pure-DP epsilon (δ = 0), ``1 / noise_multiplier``, is exactly the mechanism's ε
between any two inputs.  ``dp_accounting``'s Laplace event is coordinate-wise
with an ℓ1 sensitivity, so only that δ = 0 statement transfers to the ℓ2
mechanism; the relation's ``norm="l2"`` says so and the rendered mechanism names
it "multivariate ℓ2 Laplace".
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import attr
from dp_accounting import NeighboringRelation
from dp_accounting import dp_event as _dpe

from .._validate import check_choice, check_delta, check_positive, check_probability, check_real
from ..errors import InvalidArgumentError

__all__ = ["ACCOUNTANT_KINDS", "NORMS", "RELATIONS", "Neighbouring", "PrivacyGuarantee", "describe_event"]

_REL_TOL = 1e-9

#: Kinds of neighbouring relation.
#:
#: ``"replace-one"``: one record replaced by another (substitution);
#: ``"add-remove-one"``: one record added or removed;
#: ``"bounded-change"``: the protected object moves by at most ``bound`` (e.g. a Gram matrix with
#: ``||S - S'||_F <= Δ_G``), whatever the records behind it;
#: ``"metric"``: d_X-privacy, ε per unit of distance between any two inputs, at most ``bound`` apart.
RELATIONS: tuple[str, ...] = ("replace-one", "add-remove-one", "bounded-change", "metric")

#: Norms a ``bound`` may be measured in.
NORMS: tuple[str, ...] = ("l1", "l2", "frobenius")

#: How ``epsilon``/``delta`` were obtained from the event.
ACCOUNTANT_KINDS: tuple[str, ...] = ("analytic-gaussian", "opacus-rdp", "opacus-prv", "dp-accounting-pld", "laplace")

_NORM_TEXT = {"l1": "ℓ1", "l2": "ℓ2", "frobenius": "Frobenius"}
_ACCOUNTANT_TEXT = {
    "analytic-gaussian": "the exact analytic Gaussian mechanism (Balle & Wang 2018)",
    "opacus-rdp": "opacus's RDP accountant",
    "opacus-prv": "opacus's PRV accountant",
    "dp-accounting-pld": "dp-accounting's PLD accountant",
    "laplace": "the Laplace mechanism's pure-DP bound ε = 1/noise multiplier (δ = 0)",
}


def _fmt_epsilon(eps: float) -> str:
    if math.isinf(eps):
        return "∞"
    if eps == 0:
        return "0"
    if eps >= 0.01:
        return f"{eps:.2f}"
    return f"{eps:.3g}"


def _fmt_delta(delta: float) -> str:
    if delta == 0:
        return "0"
    return f"{delta:.3g}"


def _check_text(name: str, value: Any, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        kind = "a string" if allow_empty else "a non-empty string"
        raise InvalidArgumentError(f"{name} must be {kind}, got {value!r}")
    return value


def _check_strings(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    try:
        out = tuple(value)
    except TypeError:
        raise InvalidArgumentError(f"{name} must be a sequence of strings, got {value!r}") from None
    if not all(isinstance(v, str) for v in out):
        raise InvalidArgumentError(f"{name} must contain only strings, got {out!r}")
    return out


# ---------------------------------------------------------------------------------------- neighbouring
@dataclass(frozen=True)
class Neighbouring:
    """A neighbouring relation: which inputs a release must not tell apart.

    Attributes:
        relation: one of :data:`RELATIONS` (``"replace-one"``, ``"add-remove-one"``, ``"bounded-change"``,
            ``"metric"``).
        unit: what one record (or the protected object) is, e.g. ``"one gallery embedding (unit sphere)"``.
        bound: the sensitivity under the relation, ``> 0`` and finite, measured in ``norm``: the largest distance
            the mechanism's input moves between neighbours (``2 C`` under replace-one, ``C`` under add/remove-one
            for a per-record bound ``C``; the distance for ``"bounded-change"``; the largest distance between any
            two inputs for ``"metric"``).  Required for ``"bounded-change"`` and ``"metric"``.
        norm: one of :data:`NORMS`; required exactly when ``bound`` is given.
        detail: free-text qualification of the relation (e.g. which parts of a record stay fixed).
    """

    relation: str
    unit: str
    bound: float | None = None
    norm: str | None = None
    detail: str = ""

    def __post_init__(self) -> None:
        check_choice("relation", self.relation, RELATIONS)
        _check_text("unit", self.unit)
        if self.bound is not None:
            b = check_real("bound", self.bound)
            if b <= 0:
                raise InvalidArgumentError(f"bound must be > 0 (a sensitivity or distance; allowed range: (0, inf)), "
                                           f"got {b}")
            object.__setattr__(self, "bound", b)
            if self.norm is None:
                raise InvalidArgumentError(f"norm is required with bound={b:g}; valid values are: {', '.join(NORMS)}")
        elif self.relation in ("bounded-change", "metric"):
            raise InvalidArgumentError(f"bound is required (> 0) for relation={self.relation!r}")
        if self.norm is not None:
            check_choice("norm", self.norm, NORMS)
            if self.bound is None:
                raise InvalidArgumentError(f"norm={self.norm!r} needs a bound (> 0) to refer to")
        _check_text("detail", self.detail, allow_empty=True)

    @property
    def is_metric(self) -> bool:
        """True for a d_X-privacy (metric) relation: ε per unit of distance."""
        return self.relation == "metric"

    @property
    def scale(self) -> float | None:
        """The per-record norm bound ``C`` a noise multiplier is relative to (``bound / 2`` under replace-one,
        ``bound`` otherwise), or None without a bound."""
        if self.bound is None:
            return None
        return self.bound / 2.0 if self.relation == "replace-one" else self.bound

    def accounting_relation(self) -> NeighboringRelation:
        """The ``dp_accounting.NeighboringRelation`` to account an event under this relation with.

        ``REPLACE_ONE`` for replace-one, ``ADD_OR_REMOVE_ONE`` otherwise (for bounded-change and metric relations
        a shift of the unsampled mechanism's input by ``bound``, which dp_accounting's add/remove relation
        accounts with noise multipliers relative to ``bound``).
        """
        if self.relation == "replace-one":
            return NeighboringRelation.REPLACE_ONE
        return NeighboringRelation.ADD_OR_REMOVE_ONE

    def describe(self) -> str:
        """The relation in words."""
        norm = _NORM_TEXT.get(self.norm or "", "")
        if self.relation == "replace-one":
            text = f"replace-one (substitution): {self.unit} replaced by another"
        elif self.relation == "add-remove-one":
            text = f"add/remove-one: {self.unit} added or removed"
        elif self.relation == "bounded-change":
            text = f"bounded change: {self.unit} moved by at most {self.bound:.4g} in {norm} norm"
        else:
            text = (f"metric (d_X-privacy) on {self.unit}: ε per unit of {norm} distance between two such inputs, "
                    f"any two at most {self.bound:.4g} apart")
        if self.bound is not None and self.relation in ("replace-one", "add-remove-one"):
            text += f" ({norm} sensitivity {self.bound:.4g})"
        if self.detail:
            text += f"; {self.detail}"
        return text

    def __str__(self) -> str:
        return self.describe()


# ---------------------------------------------------------------------------------------- DP events
_KNOWN_EVENTS = (
    _dpe.GaussianDpEvent, _dpe.LaplaceDpEvent, _dpe.PoissonSampledDpEvent, _dpe.SelfComposedDpEvent,
    _dpe.ComposedDpEvent, _dpe.NonPrivateDpEvent, _dpe.NoOpDpEvent,
)


def _check_event(name: str, event: Any) -> None:
    """Reject what is not a dp_accounting DpEvent instance privkit can describe; check the parameters."""
    if not isinstance(event, _KNOWN_EVENTS):
        got = event.__name__ if isinstance(event, type) else type(event).__name__
        raise InvalidArgumentError(f"{name} must be a dp_accounting DpEvent instance, one of "
                                   f"{', '.join(c.__name__ for c in _KNOWN_EVENTS)}; got {got}")
    if isinstance(event, (_dpe.GaussianDpEvent, _dpe.LaplaceDpEvent)):
        v = check_real(f"{name}.noise_multiplier", event.noise_multiplier)
        if v < 0:
            raise InvalidArgumentError(f"{name}.noise_multiplier must be >= 0, got {v}")
    elif isinstance(event, _dpe.PoissonSampledDpEvent):
        check_probability(f"{name}.sampling_probability", event.sampling_probability, open_low=False, open_high=False)
        _check_event(f"{name}.event", event.event)
    elif isinstance(event, _dpe.SelfComposedDpEvent):
        if isinstance(event.count, bool) or not isinstance(event.count, int) or event.count < 0:
            raise InvalidArgumentError(f"{name}.count must be an integer >= 0, got {event.count!r}")
        _check_event(f"{name}.event", event.event)
    elif isinstance(event, _dpe.ComposedDpEvent):
        if isinstance(event.events, (str, bytes)) or not hasattr(event.events, "__iter__"):
            raise InvalidArgumentError(f"{name}.events must be a list of DpEvents, got {event.events!r}")
        for i, e in enumerate(event.events):
            _check_event(f"{name}.events[{i}]", e)


def _contains(event: Any, cls: type) -> bool:
    if isinstance(event, cls):
        return True
    if isinstance(event, (_dpe.PoissonSampledDpEvent, _dpe.SelfComposedDpEvent)):
        return _contains(event.event, cls)
    if isinstance(event, _dpe.ComposedDpEvent):
        return any(_contains(e, cls) for e in event.events)
    return False


def describe_event(event: Any, neighbours: Neighbouring | None = None) -> str:
    """A dp_accounting event in words; with ``neighbours`` the noise scale is given in absolute units too."""
    scale = None if neighbours is None else neighbours.scale
    if isinstance(event, _dpe.GaussianDpEvent):
        z = event.noise_multiplier
        extra = f", σ = {z * scale:.4g}" if scale is not None else ""
        return f"Gaussian mechanism (noise multiplier {z:.4g}{extra})"
    if isinstance(event, _dpe.LaplaceDpEvent):
        b = event.noise_multiplier
        extra = f", scale {b * scale:.4g}" if scale is not None else ""
        if neighbours is not None and neighbours.is_metric:
            name = "multivariate ℓ2 Laplace mechanism" if neighbours.norm == "l2" else "Laplace mechanism"
            per_unit = f"; ε per unit distance {1.0 / (b * scale):.4g}" if b > 0 else ""
            return f"{name}, metric DP (noise multiplier {b:.4g}{extra}{per_unit})"
        return f"Laplace mechanism (noise multiplier {b:.4g}{extra})"
    if isinstance(event, _dpe.PoissonSampledDpEvent):
        return (f"Poisson-subsampled (q = {event.sampling_probability:.4g}) "
                f"{describe_event(event.event, neighbours)}")
    if isinstance(event, _dpe.SelfComposedDpEvent):
        return f"{event.count} × [{describe_event(event.event, neighbours)}] (composition)"
    if isinstance(event, _dpe.ComposedDpEvent):
        return "composition of: " + " + ".join(f"[{describe_event(e, neighbours)}]" for e in event.events)
    if isinstance(event, _dpe.NonPrivateDpEvent):
        return "non-private (no DP noise)"
    if isinstance(event, _dpe.NoOpDpEvent):
        return "no-op (nothing private is released)"
    return type(event).__name__


def _event_dict(event: Any) -> Any:
    if attr.has(type(event)):
        fields = attr.fields(type(event))
        return {"type": type(event).__name__, **{f.name: _event_dict(getattr(event, f.name)) for f in fields}}
    if isinstance(event, (list, tuple)):
        return [_event_dict(e) for e in event]
    return event


def _event_from_dict(value: Any) -> Any:
    """The inverse of :func:`_event_dict`: dp_accounting events from nested dicts with a ``"type"`` key."""
    if isinstance(value, Mapping) and "type" in value:
        kind = getattr(_dpe, value["type"], None)
        if kind is None or not attr.has(kind):
            raise InvalidArgumentError(f"unknown dp_accounting event type {value['type']!r}")
        return kind(**{k: _event_from_dict(v) for k, v in value.items() if k != "type"})
    if isinstance(value, list):
        return [_event_from_dict(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------- guarantee
@dataclass(frozen=True)
class PrivacyGuarantee:
    """An (epsilon, delta)-DP (or metric-DP) statement about one release.

    Attributes:
        epsilon: The epsilon that holds, ``> 0``; ``math.inf`` means "no guarantee".  For a metric relation, the
            indistinguishability of any two inputs (``epsilon_per_unit * neighbours.bound``).
        delta: The delta that holds, in ``[0, 1]`` (``1`` means no guarantee).
        neighbours: The neighbouring relation (:class:`Neighbouring`).
        protects: What an adversary cannot learn, e.g. ``"one face embedding"`` (free text).
        event: The mechanism as a ``dp_accounting`` DpEvent (its noise multipliers relative to
            ``neighbours.scale``); ``NonPrivateDpEvent`` only with ``epsilon = inf``.
        requested_epsilon: The epsilon the caller asked for, if any.
        requested_delta: The delta the caller asked for, if any.
        notes: Free-text caveats, shown after the statement.
        processing: Public pre-/post-processing around the event, in order (e.g. clamping, projection).
        accountant: How ``epsilon``/``delta`` were obtained from the event, one of :data:`ACCOUNTANT_KINDS`,
            or None (no accounting: a non-private release).

    ``neighbouring`` and ``mechanism`` are the relation and the mechanism in words, rendered from
    ``neighbours``, ``event``, ``processing`` and ``accountant``.
    """

    epsilon: float
    delta: float
    neighbours: Neighbouring
    protects: str
    event: Any
    requested_epsilon: float | None = None
    requested_delta: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    processing: tuple[str, ...] = field(default_factory=tuple)
    accountant: str | None = None

    def __post_init__(self) -> None:
        eps = self.epsilon
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) and not hasattr(eps, "__float__"):
            raise InvalidArgumentError(f"epsilon must be a real number > 0 or math.inf, got {eps!r}")
        eps = float(eps)
        if math.isnan(eps) or eps <= 0 or eps == -math.inf:
            raise InvalidArgumentError(f"epsilon must be > 0 (allowed range: (0, inf], inf meaning no guarantee), "
                                       f"got {eps}")
        dlt = check_probability("delta", self.delta, open_low=False, open_high=False)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", dlt)
        if not isinstance(self.neighbours, Neighbouring):
            raise InvalidArgumentError(f"neighbours must be a privkit.privacy.Neighbouring, "
                                       f"got {type(self.neighbours).__name__}")
        _check_text("protects", self.protects)
        _check_event("event", self.event)
        if _contains(self.event, _dpe.NonPrivateDpEvent) and math.isfinite(eps):
            raise InvalidArgumentError(f"event contains a NonPrivateDpEvent, so epsilon must be inf (no guarantee), "
                                       f"got {eps}")
        if self.requested_epsilon is not None:
            object.__setattr__(self, "requested_epsilon", check_positive("requested_epsilon", self.requested_epsilon))
        if self.requested_delta is not None:
            req_d = check_delta(self.requested_delta, "requested_delta", allow_zero=True)
            object.__setattr__(self, "requested_delta", req_d)
        object.__setattr__(self, "notes", _check_strings("notes", self.notes))
        object.__setattr__(self, "processing", _check_strings("processing", self.processing))
        if self.accountant is not None:
            check_choice("accountant", self.accountant, ACCOUNTANT_KINDS)

    # ------------------------------------------------------------------ queries
    @property
    def is_meaningful(self) -> bool:
        """False when the statement guarantees nothing (``epsilon = inf`` or ``delta = 1``)."""
        return math.isfinite(self.epsilon) and self.delta < 1.0

    @property
    def meets_request(self) -> bool:
        """True when every requested value is met (relative slack 1e-9 for rounding)."""
        if self.requested_epsilon is not None and not self.epsilon <= self.requested_epsilon * (1 + _REL_TOL):
            return False
        if self.requested_delta is not None and not self.delta <= self.requested_delta * (1 + _REL_TOL):
            return False
        return True

    @property
    def epsilon_per_unit(self) -> float | None:
        """For a metric relation, ε per unit of distance (``epsilon / neighbours.bound``); None otherwise."""
        if not self.neighbours.is_metric or self.neighbours.bound is None:
            return None
        return self.epsilon / self.neighbours.bound

    @property
    def neighbouring(self) -> str:
        """The neighbouring relation in words (rendered from ``neighbours``)."""
        return self.neighbours.describe()

    @property
    def mechanism(self) -> str:
        """The mechanism in words (rendered from ``event``, ``processing`` and ``accountant``)."""
        parts = [describe_event(self.event, self.neighbours), *self.processing]
        if self.accountant is not None:
            parts.append(f"accounted with {_ACCOUNTANT_TEXT[self.accountant]}")
        return "; ".join(parts)

    # ---------------------------------------------------------------- rendering
    def statement(self) -> str:
        """The bare ``(ε=…, δ=…)-DP`` statement; for a metric relation also the ε per unit of distance."""
        text = f"(ε={_fmt_epsilon(self.epsilon)}, δ={_fmt_delta(self.delta)})-DP"
        per_unit = self.epsilon_per_unit
        if per_unit is not None:
            text += f" between any two inputs (metric DP: ε={_fmt_epsilon(per_unit)} per unit of distance)"
        return text

    def _requested(self) -> str:
        """The requested values, e.g. ``"ε=1.00, δ=1e-05"`` (empty without a request)."""
        req = []
        if self.requested_epsilon is not None:
            req.append(f"ε={_fmt_epsilon(self.requested_epsilon)}")
        if self.requested_delta is not None:
            req.append(f"δ={_fmt_delta(self.requested_delta)}")
        return ", ".join(req)

    def warnings(self) -> list[str]:
        """Human-readable warnings (unmet request, no meaningful guarantee)."""
        out: list[str] = []
        if not self.meets_request:
            out.append(f"WARNING: the requested ({self._requested()}) is NOT met; the guarantee that actually "
                       f"holds is {self.statement()}")
        if not self.is_meaningful:
            out.append("WARNING: this release has NO meaningful privacy guarantee (ε = ∞ or δ = 1)")
        return out

    def __str__(self) -> str:
        text = f"{self.statement()} [{self.mechanism}] neighbouring: {self.neighbouring}; protects: {self.protects}"
        if self._requested() and self.meets_request:
            text += " (meets the request)"
        parts = [text, *self.warnings(), *(f"note: {n}" for n in self.notes)]
        return " | ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (``epsilon = inf`` is kept as ``float('inf')``).

        Holds the structure (``neighbours`` as a dict, ``event`` as nested dicts with a ``"type"`` key) and the
        rendered ``neighbouring`` and ``mechanism``.
        """
        return {"epsilon": self.epsilon, "delta": self.delta, "neighbouring": self.neighbouring,
                "neighbours": asdict(self.neighbours), "protects": self.protects, "mechanism": self.mechanism,
                "event": _event_dict(self.event), "processing": list(self.processing), "accountant": self.accountant,
                "requested_epsilon": self.requested_epsilon, "requested_delta": self.requested_delta,
                "notes": list(self.notes), "meets_request": self.meets_request}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "PrivacyGuarantee":
        """The guarantee :meth:`to_dict` described (e.g. read back from a result store's JSON); equal to the original.

        Raises:
            InvalidArgumentError: ``d`` is not such a dict, or names an event type dp_accounting does not have.
        """
        if not isinstance(d, Mapping) or not {"epsilon", "delta", "neighbours", "protects", "event"} <= set(d):
            raise InvalidArgumentError("d must be a dict written by PrivacyGuarantee.to_dict (epsilon, delta, "
                                       "neighbours, protects, event, ...)")
        return cls(epsilon=d["epsilon"], delta=d["delta"], neighbours=Neighbouring(**d["neighbours"]),
                   protects=d["protects"], event=_event_from_dict(d["event"]),
                   requested_epsilon=d.get("requested_epsilon"), requested_delta=d.get("requested_delta"),
                   notes=tuple(d.get("notes", ())), processing=tuple(d.get("processing", ())),
                   accountant=d.get("accountant"))

    def _repr_markdown_(self) -> str:
        lines = [f"**{self.statement()}** — {self.mechanism}", "",
                 f"- neighbouring: {self.neighbouring}", f"- protects: {self.protects}"]
        if self._requested():
            lines.append(f"- requested: ({self._requested()}) — {'met' if self.meets_request else '**NOT met**'}")
        lines += [f"- ⚠️ **{w}**" for w in self.warnings()]
        lines += [f"- note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        items = [f"<li>neighbouring: {html.escape(self.neighbouring)}</li>",
                 f"<li>protects: {html.escape(self.protects)}</li>"]
        items += [f"<li style='color:#b00'><b>{html.escape(w)}</b></li>" for w in self.warnings()]
        items += [f"<li>note: {html.escape(n)}</li>" for n in self.notes]
        return (f"<div><b>{html.escape(self.statement())}</b> — {html.escape(self.mechanism)}"
                f"<ul>{''.join(items)}</ul></div>")
