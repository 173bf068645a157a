"""Rewrite the README's claims tables from the committed claims CSVs (ISP ``table8_claims``, ScoreShield
``tableV1_claims``): every row through ``privkit.studies.claims.claim_readme_row`` and the verdict counts sentence
("N hold, M do not, K are not resolvable.") above each table, so the README cannot drift from its CSV.

    python tools/readme_claims.py           # rewrite README.md in place
    python tools/readme_claims.py --check   # exit 1 if README.md is not what the CSVs give
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from privkit.studies.claims import claim_readme_row  # noqa: E402

HEADER = "| claim | paper | our measure | ours [95 % interval] | verdict |"
#: README section heading -> claims CSV (relative to figures/).
TABLES = {"#### The paper's claims at the default scale (`tableV1_claims`)": "scoreshield/tableV1_claims.csv",
          "#### The paper's claims at the default scale (`table8_claims`)": "isp/table8_claims.csv"}
_COUNTS = re.compile(r"\d+ hold,\s+\d+ do not,\s+\d+ are not\s+resolvable\.")


def counts_sentence(c: pd.DataFrame) -> str:
    n = c.verdict.value_counts()
    return (f"{n.get('holds', 0)} hold, {n.get('does not hold', 0)} do not, {n.get('not resolvable', 0)} are not "
            "resolvable.")


def render(readme: str, figures: Path) -> str:
    """The README with each claims section's counts sentence and table rebuilt from its CSV."""
    lines = readme.split("\n")
    for heading, name in TABLES.items():
        c = pd.read_csv(figures / name)
        start = lines.index(heading)
        head = next(i for i in range(start, len(lines)) if lines[i] == HEADER)
        intro = "\n".join(lines[start + 1:head])
        if not _COUNTS.search(intro):
            raise SystemExit(f"no verdict counts sentence under {heading!r}")
        intro = _COUNTS.sub(counts_sentence(c), intro, count=1)
        end = head + 2
        while end < len(lines) and lines[end].startswith("|"):
            end += 1
        rows = [claim_readme_row(r) for _, r in c.iterrows()]
        lines = lines[:start + 1] + intro.split("\n") + lines[head:head + 2] + rows + lines[end:]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only check; exit 1 when README.md differs")
    ns = p.parse_args(argv)
    path = ROOT / "README.md"
    old = path.read_text(encoding="utf-8")
    new = render(old, ROOT / "figures")
    if ns.check:
        if new != old:
            print("README.md's claims tables differ from the committed CSVs: run python tools/readme_claims.py")
            return 1
        return 0
    path.write_text(new, encoding="utf-8")
    print("README.md: claims tables rewritten" if new != old else "README.md: claims tables already current")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
