"""The closing checks of the SynthesisNet notebook (``notebooks/synthesisnet.py``).

The paper could not be obtained, so its claims have no numbers to compare with and the notebook does not use
:func:`privkit.studies.claims.claim_row`: each check here is a sentence made from the measurements, whether it
holds, and whether it is *enforced* (the notebook fails when an enforced check does not hold) or only reported.
:func:`closing_checks` builds the list in the notebook's order; :func:`enforced_failures` picks what fails it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from privkit._validate import check_int
from privkit.errors import InsufficientDataError, InvalidArgumentError
from privkit.studies.synthesisnet import experiments as X
from privkit.studies.synthesisnet.tables import WHOLE, JudgedReleases

__all__ = ["CHECK_COLUMNS", "closing_checks", "enforced_failures", "format_check"]

#: Columns of the checks table (Table 5).
CHECK_COLUMNS = ("claim", "holds", "enforced")

Check = dict[str, Any]


def _check(text: str, holds: Any, enforced: Any) -> Check:
    return {"claim": text, "holds": bool(holds), "enforced": bool(enforced)}


def _guarantee_checks(guarantees: Sequence[Mapping[str, Any]], *, clip_norm: float,
                      whole_clip_norm: float) -> list[Check]:
    """Check 1: the release without noise states ε = inf, and every noisy release ε·2·clip_norm with δ = 0."""
    checks = []
    for row in guarantees:
        g_ = row["guarantee"]
        if row["method"] == "no DP noise":
            checks.append(_check(f"no-noise ablation reports ε = {g_.epsilon}", not math.isfinite(g_.epsilon), True))
        else:
            clip = whole_clip_norm if row["method"] == WHOLE else clip_norm
            ok = math.isclose(g_.epsilon, 2 * row["epsilon"] * clip) and g_.delta == 0.0
            if not ok:
                checks.append(_check(f"guarantee of {row['method']} at ε={row['epsilon']:g}: {g_.statement}", ok, True))
    checks.append(_check(f"all {len(guarantees) - 1} noisy releases state ε·2·clip_norm with δ = 0",
                         not any(not c["holds"] for c in checks), True))
    return checks


def _chance_checks(judged: pd.DataFrame, eps_min: float) -> list[Check]:
    """Check 2: rank-1 at the smallest ε within the 99% binomial interval of chance, per judge and noisy method."""
    checks = []
    for judge in ("faceres", "dlib", "model identity encoder"):
        for method in ("SynthesisNet", WHOLE):
            r = judged[(judged.judge == judge) & (judged.method == method) & (judged.epsilon == eps_min)]
            if not len(r):
                continue
            r = r.iloc[0]
            lo, hi = X.rank1_chance_interval(r.rank1_chance, int(r.n_probes), confidence=0.99)
            checks.append(_check(
                f"{judge}, {method}: rank-1 at ε={eps_min:g} {round(r.rank1 * r.n_probes)}/{int(r.n_probes)} = "
                f"{r.rank1:.3f} within the 99% chance interval [{lo:.3f}, {hi:.3f}] (chance {r.rank1_chance:.3f})",
                lo <= r.rank1 <= hi, judge != "model identity encoder" and method == "SynthesisNet"))
    return checks


def _distance_checks(judging: JudgedReleases, identities: torch.Tensor, *, n_bootstrap: int, seed: int,
                     full_scale: bool) -> list[Check]:
    """Check 3: the identity distance falls from the smallest to the largest ε (paired drop enforced at full scale;
    separated end intervals and separated rank-1 intervals reported)."""
    judged = judging.judged
    checks = []
    for judge in ("faceres", "dlib", "model identity encoder"):
        sw = judged[(judged.judge == judge) & (judged.method == "SynthesisNet")]
        if len(sw) < 2:
            continue
        f = X.distance_decrease_failures(sw)
        a_, b_ = sw.sort_values("epsilon").iloc[0], sw.sort_values("epsilon").iloc[-1]
        ids_j = identities.cpu() if judge == "model identity encoder" else judging.j_ids
        pc = X.paired_distance_change(judging.e_orig[judge], judging.e_pub_of[(judge, "SynthesisNet", a_.epsilon)],
                                      judging.e_pub_of[(judge, "SynthesisNet", b_.epsilon)], ids_j,
                                      n_bootstrap=n_bootstrap, seed=seed)
        checks.append(_check(
            f"{judge}: identity distance falls from ε={a_.epsilon:g} to ε={b_.epsilon:g}, face by face: mean "
            f"drop {pc['mean_change']:.3f}, 95% identity-bootstrap CI [{pc['change_low']:.3f}, "
            f"{pc['change_high']:.3f}] above 0 ({pc['n']} faces)", pc["change_low"] > 0,
            full_scale and judge != "model identity encoder"))
        checks.append(_check(
            f"{judge}: identity distance falls with ε within bootstrap error and the separate CIs of the ends "
            f"separate, {a_.identity_distance:.3f} [{a_.distance_low:.3f}, {a_.distance_high:.3f}] at "
            f"ε={a_.epsilon:g} -> {b_.identity_distance:.3f} [{b_.distance_low:.3f}, {b_.distance_high:.3f}] at "
            f"ε={b_.epsilon:g}" + ("" if not f else " — " + "; ".join(f)), not f, False))
        checks.append(_check(
            f"{judge}: rank-1 Wilson intervals at the ends of the ε grid separate: {a_.rank1:.3f} "
            f"[{a_.rank1_low:.3f}, {a_.rank1_high:.3f}] at ε={a_.epsilon:g} vs {b_.rank1:.3f} "
            f"[{b_.rank1_low:.3f}, {b_.rank1_high:.3f}] at ε={b_.epsilon:g}", b_.rank1_low > a_.rank1_high, False))
    return checks


def _identity_kept_checks(judged: pd.DataFrame, *, full_scale: bool) -> list[Check]:
    """Check 4: the noise-free release and the reconstruction keep identity for the real recognisers (enforced at
    full scale for both judges); faceres's rank-1 of the noise-free release against privkit's 5x-chance target
    (reported)."""
    checks = []
    for judge in ("faceres", "dlib"):
        for method in ("no DP noise", "reconstruction (decoder)"):
            r = judged[(judged.judge == judge) & (judged.method == method)]
            if len(r):
                r = r.iloc[0]
                checks.append(_check(
                    f"{judge}, {method}: rank-1 {r.rank1:.3f} [{r.rank1_low:.3f}, {r.rank1_high:.3f}] above chance "
                    f"{r.rank1_chance:.3f} ({r.rank1 / r.rank1_chance:.1f}x); TAR {r.tar:.3f} "
                    f"[{r.tar_low:.3f}, {r.tar_high:.3f}] at FAR {r.far:.3g}", r.rank1_low > r.rank1_chance,
                    full_scale))
    r = judged[(judged.judge == "faceres") & (judged.method == "no DP noise")].iloc[0]
    checks.append(_check(f"privkit target: faceres rank-1 of the noise-free release {r.rank1:.3f} >= 5x chance "
                         f"({5 * r.rank1_chance:.3f}): {r.rank1 / r.rank1_chance:.1f}x",
                         r.rank1 >= 5 * r.rank1_chance, False))
    return checks


def _attribute_checks(att: pd.DataFrame, gender_age: pd.DataFrame, *, eps_min: float,
                      full_scale: bool) -> list[Check]:
    """Check 6: every attribute the probe reads on real faces stays above its majority rate at every ε (full
    scale), and faceres's gender agreement against chance (reported)."""
    checks = []
    if full_scale:
        orig_acc = att[att.method == "original"].set_index("attribute")
        readable = [a for a, r in orig_acc.iterrows()
                    if r.accuracy > r.majority + 2 * math.sqrt(r.majority * (1 - r.majority) / r.n)]
        checks.append(_check(f"the probe reads {readable or 'no attribute'} on real faces above the majority rate",
                             bool(readable), False))
        for a in readable:
            acc_a = att[(att.method == "SynthesisNet") & (att.attribute == a)].set_index("epsilon").accuracy
            checks.append(_check(
                f"{a}: probe accuracy at every ε ({acc_a.min():.3f} .. {acc_a.max():.3f}) above the majority rate "
                f"{orig_acc.majority[a]:.3f} (originals {orig_acc.accuracy[a]:.3f})",
                bool((acc_a > orig_acc.majority[a]).all()), True))
    for method, e_ in (("SynthesisNet", eps_min), (WHOLE, eps_min), ("no DP noise", math.inf)):
        g = gender_age[(gender_age.method == method) & (gender_age.epsilon == e_)]
        if len(g):
            g = g.iloc[0]
            checks.append(_check(
                f"{method}: faceres gender agreement at ε={e_:g} {g.gender_agreement:.3f} "
                f"[{g.gender_agreement_low:.3f}, {g.gender_agreement_high:.3f}] above chance {g.gender_chance:.3f}; "
                f"age error {g.age_mae:.1f} [{g.age_mae_low:.1f}, {g.age_mae_high:.1f}] years vs "
                f"{g.age_mae_shuffled:.1f} for an unrelated face", g.gender_agreement_low > g.gender_chance, False))
    return checks


def closing_checks(guarantees: Sequence[Mapping[str, Any]], judging: JudgedReleases, *, leak: pd.DataFrame,
                   att: pd.DataFrame, identities: torch.Tensor, epsilons: Sequence[float], clip_norm: float,
                   whole_clip_norm: float, n_bootstrap: int, full_scale: bool, seed: int = 0) -> list[Check]:
    """The notebook's closing checks, in order: (1) every guarantee's ε and δ; (2) rank-1 at the smallest ε within
    chance; (3) identity distance falls with ε; (4) the noise-free release and the reconstruction keep identity;
    (5) z_att's leave-one-out rank-1 within chance (reported); (6) the attribute floor and gender agreement.

    Args:
        guarantees: ``{"method", "epsilon", "guarantee"}`` per release with a guarantee.
        judging: what :func:`~privkit.studies.synthesisnet.tables.judge_releases` returned.
        leak: the latent leakage table (second row: z_att); att: the attribute probe table.
        identities: identities of the published faces (the model's own encoder judges all of them).
        epsilons: the ε grid; clip_norm / whole_clip_norm: the latent radius of SynthesisNet / of the whole-latent
            baseline; n_bootstrap: identity-bootstrap replicates; full_scale: False at the smoke scale (checks
            3, 4 and 6 then only report).

    Returns:
        One ``{"claim", "holds", "enforced"}`` dict per check.

    Raises:
        InsufficientDataError: no ε or no guarantee; InvalidArgumentError: ``leak`` without a z_att row,
        ``n_bootstrap < 1`` or ``seed < 0``.
    """
    if not len(epsilons) or not len(guarantees):
        raise InsufficientDataError("closing_checks needs the ε grid and at least one guarantee")
    if len(leak) < 2:
        raise InvalidArgumentError("leak must hold the z_id and z_att rows of the latent leakage table")
    n_bootstrap = check_int("n_bootstrap", n_bootstrap, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    eps_min = min(epsilons)
    checks = _guarantee_checks(guarantees, clip_norm=clip_norm, whole_clip_norm=whole_clip_norm)
    checks += _chance_checks(judging.judged, eps_min)
    checks += _distance_checks(judging, identities, n_bootstrap=n_bootstrap, seed=seed, full_scale=full_scale)
    checks += _identity_kept_checks(judging.judged, full_scale=full_scale)
    lz = leak.iloc[1]
    checks.append(_check(f"z_att (no noise, not covered) leave-one-out rank-1 among test faces {lz.rank1:.3f} within "
                         f"the 99% chance interval [{lz.chance_low:.3f}, {lz.chance_high:.3f}] (chance {lz.chance:.3f})",
                         lz.chance_low <= lz.rank1 <= lz.chance_high, False))
    checks += _attribute_checks(att, judging.gender_age, eps_min=eps_min, full_scale=full_scale)
    return checks


def format_check(check: Mapping[str, Any]) -> str:
    """One printed line per check: ``[holds|DOES NOT HOLD; enforced|reported] <claim>``."""
    tag = "enforced" if check["enforced"] else "reported"
    return f"[{'holds' if check['holds'] else 'DOES NOT HOLD'}; {tag}] {check['claim']}"


def enforced_failures(checks: Sequence[Mapping[str, Any]]) -> list[str]:
    """The claims of the enforced checks that do not hold."""
    return [c["claim"] for c in checks if c["enforced"] and not c["holds"]]
