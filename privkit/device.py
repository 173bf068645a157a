"""Device selection: CUDA when present and asked for, CPU otherwise."""

from __future__ import annotations

import torch

from .errors import InvalidArgumentError, UnknownNameError

DEVICES = ("auto", "cpu", "cuda")


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """Turn ``"auto" | "cpu" | "cuda" | "cuda:N" | torch.device | None`` into a ``torch.device``.

    ``"auto"`` (and ``None``) pick CUDA when available, else the CPU.  Asking for
    CUDA on a machine without it is an error rather than a silent fallback.
    """
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if isinstance(device, torch.device):
        dev = device
    elif isinstance(device, str) and (device in DEVICES or device.startswith("cuda:")):
        dev = torch.device(device)
    else:
        raise UnknownNameError("device", device, DEVICES)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InvalidArgumentError("device='cuda' was requested but no CUDA device is available; use 'auto' or 'cpu'")
    return dev
