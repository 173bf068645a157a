"""Studies: what the notebooks call to reproduce a paper, apart from the mechanisms a user imports.

One subpackage a paper (``isp``, ``dppose``, ``scoreshield``, ``synthesisnet``), each with ``presets`` (a frozen
dataclass per scale: sample sizes, grids, steps) and ``experiments`` (experiment designs, tables, claim checks and
the paper's reported numbers); beside them ``claims`` (verdicts from data with intervals) and ``figures`` (byte-stable
figure and table output, run manifests, section timers).  Studies import mechanisms, data and encoders; nothing
below them imports a study.
"""
