"""The privacy guarantee that accompanies every privkit release.

A :class:`PrivacyGuarantee` is an immutable description of what a release
*really* satisfies (the ``epsilon``/``delta`` that hold), next to what the
caller asked for (``requested_epsilon``/``requested_delta``), the neighbouring
relation, what is protected and by which mechanism.  Notebooks print it; when
the request is not met (for instance the ScoreShield calibration at large
epsilon) its text says so in capitals.
"""

from __future__ import annotations

import html
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from .._validate import check_real
from ..errors import InvalidArgumentError

__all__ = ["PrivacyGuarantee"]

_REL_TOL = 1e-9


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


@dataclass(frozen=True)
class PrivacyGuarantee:
    """An (epsilon, delta)-DP statement about one release.

    Attributes:
        epsilon: The epsilon that holds, ``> 0``; ``math.inf`` means "no
            guarantee".
        delta: The delta that holds, in ``[0, 1]`` (``1`` means no guarantee).
        neighbouring: The neighbouring relation, e.g. ``"record replacement"``,
            ``"add/remove one record"``, ``"Gram adjacency ||S - S'||_F <= 2"``.
        protects: What an adversary cannot learn, e.g. ``"one face embedding"``.
        mechanism: The mechanism, e.g. ``"Gaussian mechanism (analytic)"``.
        requested_epsilon: The epsilon the caller asked for, if any.
        requested_delta: The delta the caller asked for, if any.
        notes: Free-text caveats, shown after the statement.
    """

    epsilon: float
    delta: float
    neighbouring: str
    protects: str
    mechanism: str
    requested_epsilon: float | None = None
    requested_delta: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        eps = self.epsilon
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) and not hasattr(eps, "__float__"):
            raise InvalidArgumentError(f"epsilon must be a real number > 0 or math.inf, got {eps!r}")
        eps = float(eps)
        if math.isnan(eps) or eps <= 0 or eps == -math.inf:
            raise InvalidArgumentError(
                f"epsilon must be > 0 (allowed range: (0, inf], inf meaning no guarantee), got {eps}"
            )
        dlt = check_real("delta", self.delta)
        if not 0.0 <= dlt <= 1.0:
            raise InvalidArgumentError(f"delta must lie in [0, 1], got {dlt}")
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", dlt)
        for name in ("neighbouring", "protects", "mechanism"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise InvalidArgumentError(f"{name} must be a non-empty string, got {value!r}")
        if self.requested_epsilon is not None:
            req = check_real("requested_epsilon", self.requested_epsilon)
            if req <= 0:
                raise InvalidArgumentError(f"requested_epsilon must be > 0 (allowed range: (0, inf)), got {req}")
            object.__setattr__(self, "requested_epsilon", req)
        if self.requested_delta is not None:
            req_d = check_real("requested_delta", self.requested_delta)
            if not 0.0 <= req_d < 1.0:
                raise InvalidArgumentError(f"requested_delta must lie in [0, 1), got {req_d}")
            object.__setattr__(self, "requested_delta", req_d)
        notes = self.notes
        if isinstance(notes, str):
            notes = (notes,)
        try:
            notes = tuple(notes)
        except TypeError:
            raise InvalidArgumentError(f"notes must be a sequence of strings, got {self.notes!r}") from None
        if not all(isinstance(n, str) for n in notes):
            raise InvalidArgumentError(f"notes must contain only strings, got {notes!r}")
        object.__setattr__(self, "notes", notes)

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

    # ---------------------------------------------------------------- rendering
    def statement(self) -> str:
        """The bare ``(ε=…, δ=…)-DP`` statement."""
        return f"(ε={_fmt_epsilon(self.epsilon)}, δ={_fmt_delta(self.delta)})-DP"

    def warnings(self) -> list[str]:
        """Human-readable warnings (unmet request, no meaningful guarantee)."""
        out: list[str] = []
        if not self.meets_request:
            req = []
            if self.requested_epsilon is not None:
                req.append(f"ε={_fmt_epsilon(self.requested_epsilon)}")
            if self.requested_delta is not None:
                req.append(f"δ={_fmt_delta(self.requested_delta)}")
            out.append(
                f"WARNING: the requested ({', '.join(req)}) is NOT met; the guarantee that actually "
                f"holds is {self.statement()}"
            )
        if not self.is_meaningful:
            out.append("WARNING: this release has NO meaningful privacy guarantee (ε = ∞ or δ = 1)")
        return out

    def __str__(self) -> str:
        text = (
            f"{self.statement()} [{self.mechanism}] neighbouring: {self.neighbouring}; "
            f"protects: {self.protects}"
        )
        if self.requested_epsilon is not None or self.requested_delta is not None:
            if self.meets_request:
                text += " (meets the request)"
        parts = [text, *self.warnings(), *(f"note: {n}" for n in self.notes)]
        return " | ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (``epsilon = inf`` is kept as ``float('inf')``)."""
        d = asdict(self)
        d["notes"] = list(self.notes)
        d["meets_request"] = self.meets_request
        return d

    def _repr_markdown_(self) -> str:
        lines = [f"**{self.statement()}** — {self.mechanism}", "",
                 f"- neighbouring: {self.neighbouring}", f"- protects: {self.protects}"]
        if self.requested_epsilon is not None or self.requested_delta is not None:
            req = []
            if self.requested_epsilon is not None:
                req.append(f"ε={_fmt_epsilon(self.requested_epsilon)}")
            if self.requested_delta is not None:
                req.append(f"δ={_fmt_delta(self.requested_delta)}")
            lines.append(f"- requested: ({', '.join(req)}) — {'met' if self.meets_request else '**NOT met**'}")
        for w in self.warnings():
            lines.append(f"- ⚠️ **{w}**")
        for n in self.notes:
            lines.append(f"- note: {n}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        items = [f"<li>neighbouring: {html.escape(self.neighbouring)}</li>",
                 f"<li>protects: {html.escape(self.protects)}</li>"]
        items += [f"<li style='color:#b00'><b>{html.escape(w)}</b></li>" for w in self.warnings()]
        items += [f"<li>note: {html.escape(n)}</li>" for n in self.notes]
        return (f"<div><b>{html.escape(self.statement())}</b> — {html.escape(self.mechanism)}"
                f"<ul>{''.join(items)}</ul></div>")
