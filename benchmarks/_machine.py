"""Shared by the benchmarks: a label for the CPU a result was measured on (not a benchmark itself)."""

from __future__ import annotations

from pathlib import Path


def cpu_label() -> str:
    """The CPU's model name and whether it has AVX-512 (trained results drift across CPU kernels like a seed)."""
    name, avx512 = "unknown CPU", False
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return name
    for line in text.splitlines():
        if line.startswith("model name") and name == "unknown CPU":
            name = line.split(":", 1)[1].strip()
        if line.startswith("flags"):
            avx512 = avx512 or "avx512f" in line.split()
    return f"{name} ({'AVX-512' if avx512 else 'no AVX-512'})"
