"""A small topic-labelled sentence corpus written for privkit.

Ten everyday topics with 25 short, original English sentences each (250 sentences). privkit uses it with a
real sentence encoder (:mod:`privkit.data.text`) as an offline stand-in for STS-style text data: the topic
labels give a known cluster structure against which released similarity matrices can be scored.

The sentences were written for this project; they are not taken from any dataset. They are stored in
``privkit/assets/topic_corpus.json`` (a JSON object: topic name -> list of sentences, in label order).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import InvalidArgumentError, MissingResourceError

__all__ = ["TOPICS", "topic_names", "sentences_and_labels"]

_CORPUS_FILE = Path(__file__).resolve().parent.parent / "assets" / "topic_corpus.json"


def _read_topics(path: Path) -> dict[str, tuple[str, ...]]:
    """Topic name -> sentences from the corpus file; every topic must hold the same number of sentences."""
    if not path.is_file():
        raise MissingResourceError(
            "privkit's topic corpus", expected_at=str(path), how_to_get="It ships with privkit: reinstall the package."
        )
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not data or not all(
        isinstance(v, list) and v and all(isinstance(s, str) for s in v) for v in data.values()
    ):
        raise InvalidArgumentError(f"{path}: expected a JSON object mapping topic names to lists of sentences")
    if len({len(v) for v in data.values()}) != 1:
        raise InvalidArgumentError(f"{path}: every topic must hold the same number of sentences")
    return {str(k): tuple(v) for k, v in data.items()}


#: topic name -> sentences (every topic has the same number of sentences).
TOPICS: dict[str, tuple[str, ...]] = _read_topics(_CORPUS_FILE)


def topic_names() -> tuple[str, ...]:
    """Topic names in label order (label i is ``topic_names()[i]``)."""
    return tuple(TOPICS)


def sentences_and_labels() -> tuple[list[str], list[int]]:
    """All sentences, topic by topic, with their integer topic labels."""
    return _sentences_and_labels(topic_names())


def _sentences_and_labels(names: tuple[str, ...]) -> tuple[list[str], list[int]]:
    """The sentences of the topics ``names``, topic by topic, labelled by the topic's position in ``names``."""
    sentences = [s for name in names for s in TOPICS[name]]
    labels = [i for i, name in enumerate(names) for _ in TOPICS[name]]
    return sentences, labels
