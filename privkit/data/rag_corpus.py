"""A small retrieval benchmark written for privkit: titled text chunks and questions with known gold chunks.

Ten topics with 24 short chunks each (240 chunks) and five questions per topic (50 questions). Each question is
answered by one to three *gold* chunks of its topic; the other 23–21 chunks of the topic are distractors on the
same subject (other lighthouses of the same coast, other releases of the same library, other sieges of the same
castle), so a retriever has to tell close neighbours apart rather than just find the topic. Several topics are
about invented places, firms and projects (the Kessel coast, the Orvale tramway, Haldane & Pryce, Brackwater
Marshes, quillmap, Dunmore Rovers, Castle Varn), so no fact can be looked up elsewhere; the others (bread, the
solar system, household chemistry) restate common knowledge in new words.

Every chunk, title and question was written for this project; none is taken from any dataset. The text is kept as
data, in ``privkit/assets/rag_corpus.json``. privkit uses the
benchmark for the retrieval stage of ScoreShield's DP-RAG study (``docs/scoreshield.md`` §6), embedding each chunk
as ``"title: text"`` (the paper embeds chunks with their page title) with the offline sentence encoder of
:mod:`privkit.data.text`.

Chunk order.  :func:`rag_benchmark` returns the chunks in one fixed, public permutation (seed
:data:`CHUNK_ORDER_SEED`), not topic by topic. A retrieval rule that breaks ties by index (as ScoreShield's does)
then favours no topic: under heavy noise many released scores clip to exactly +1 and the lowest indices win the
ties, which in topic order would hand one topic's questions their gold chunks by luck.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Chunk", "RagQuery", "RagBenchmark", "CHUNKS", "QUERIES", "CHUNK_ORDER_SEED", "rag_benchmark"]

#: Seed of the fixed permutation in which :func:`rag_benchmark` returns the chunks.
CHUNK_ORDER_SEED = 20240611


@dataclass(frozen=True)
class Chunk:
    """One retrievable chunk: a stable id (``"light-02"``), a title and its text."""

    id: str
    title: str
    text: str

    def embedding_text(self) -> str:
        """The string that is embedded: ``"title: text"``."""
        return f"{self.title}: {self.text}"


@dataclass(frozen=True)
class RagQuery:
    """A question, its topic and the ids of the chunks that answer it (its gold chunks)."""

    topic: str
    question: str
    gold: tuple[str, ...]


#: The benchmark's text: ``privkit/assets/rag_corpus.json`` (topic -> id prefix and ``[title, text]`` chunks; the
#: questions with their topic and gold chunk ids).
_CORPUS_FILE = Path(__file__).resolve().parent.parent / "assets" / "rag_corpus.json"


def _read_corpus() -> tuple[dict[str, tuple[Chunk, ...]], tuple[RagQuery, ...]]:
    data = json.loads(_CORPUS_FILE.read_text(encoding="utf-8"))
    chunks = {topic: tuple(Chunk(f"{t['prefix']}-{i + 1:02d}", title, text)
                           for i, (title, text) in enumerate(t["chunks"]))
              for topic, t in data["topics"].items()}
    queries = tuple(RagQuery(q["topic"], q["question"], tuple(q["gold"])) for q in data["queries"])
    return chunks, queries


#: topic name -> its chunks (24 per topic); the questions (5 per topic).
CHUNKS, QUERIES = _read_corpus()


@dataclass(frozen=True)
class RagBenchmark:
    """The benchmark as indices: what a retrieval study needs.

    Attributes:
        chunks: the chunks in retrieval-index order (a fixed public permutation, see the module docstring).
        chunk_topics: the topic of each chunk, same order.
        queries: the questions.
        gold: one tuple of chunk *indices* (into ``chunks``) per question.
    """

    chunks: tuple[Chunk, ...]
    chunk_topics: tuple[str, ...]
    queries: tuple[RagQuery, ...]
    gold: tuple[tuple[int, ...], ...]

    def chunk_texts(self) -> list[str]:
        """The strings to embed, one per chunk (``"title: text"``)."""
        return [c.embedding_text() for c in self.chunks]

    def questions(self) -> list[str]:
        """The question strings, one per query."""
        return [q.question for q in self.queries]


def rag_benchmark() -> RagBenchmark:
    """The chunks in their fixed retrieval order, the questions and the gold chunk indices."""
    flat = [(topic, c) for topic, chunks in CHUNKS.items() for c in chunks]
    order = np.random.default_rng(CHUNK_ORDER_SEED).permutation(len(flat))
    chunks = tuple(flat[i][1] for i in order)
    topics = tuple(flat[i][0] for i in order)
    index = {c.id: i for i, c in enumerate(chunks)}
    gold = tuple(tuple(index[g] for g in q.gold) for q in QUERIES)
    return RagBenchmark(chunks=chunks, chunk_topics=topics, queries=QUERIES, gold=gold)
