"""scikit-learn digits as images, and all-MiniLM-L6-v2 sentence embeddings of privkit's topic corpus."""

from __future__ import annotations

import pytest
import torch

from privkit.data.corpus import TOPICS, sentences_and_labels, topic_names
from privkit.data.digits import load_digits_images
from privkit.errors import InvalidArgumentError, UnknownNameError

# ------------------------------------------------------------------------------------------------------ digits


pytestmark = pytest.mark.slow  # a module-wide fixture takes seconds to build


def test_digits_shapes_range_and_labels():
    images, labels = load_digits_images(size=16, seed=0)
    assert images.shape == (1797, 3, 16, 16) and images.dtype == torch.float32
    assert labels.shape == (1797,) and labels.dtype == torch.int64
    assert float(images.min()) >= 0.0 and float(images.max()) <= 1.0
    assert float(images.max()) > 0.9  # full ink is present
    assert torch.equal(images[:, 0], images[:, 1]) and torch.equal(images[:, 0], images[:, 2])
    assert labels.bincount().tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]


def test_digits_native_size_matches_sklearn_and_seed_permutes():
    from sklearn.datasets import load_digits

    bunch = load_digits()
    raw, labels = load_digits_images(size=8, seed=None)
    assert torch.allclose(raw[:, 0], torch.as_tensor(bunch.images, dtype=torch.float32) / 16)
    assert labels.tolist() == bunch.target.tolist()
    a, la = load_digits_images(size=8, seed=1)
    b, lb = load_digits_images(size=8, seed=1)
    c, lc = load_digits_images(size=8, seed=2)
    assert torch.equal(a, b) and torch.equal(la, lb)
    assert not torch.equal(la, lc)
    # a permutation of the same rows: the multiset of (image, label) is preserved
    key = lambda x, y: sorted(zip(x[:, 0].flatten(1).sum(1).tolist(), y.tolist()))  # noqa: E731
    assert key(a, la) == key(raw, labels)


def test_digits_classes_are_separable():
    """The upsampled images keep class information: nearest class mean beats chance by far."""
    images, labels = load_digits_images(size=16, seed=0)
    x = images[:, 0].flatten(1)
    train, test = slice(0, 1200), slice(1200, None)
    means = torch.stack([x[train][labels[train] == k].mean(0) for k in range(10)])
    pred = torch.cdist(x[test], means).argmin(1)
    assert (pred == labels[test]).float().mean() > 0.8


def test_digits_bad_arguments():
    with pytest.raises(InvalidArgumentError, match="size"):
        load_digits_images(size=4)
    with pytest.raises(InvalidArgumentError, match="seed"):
        load_digits_images(seed=0.5)


# ------------------------------------------------------------------------------------------------------ corpus


def test_corpus_shape():
    names = topic_names()
    assert len(names) >= 8
    sentences, labels = sentences_and_labels()
    assert all(len(TOPICS[n]) >= 25 for n in names)
    assert len(sentences) == len(labels) == sum(len(v) for v in TOPICS.values())
    assert len(set(sentences)) == len(sentences)  # no duplicates
    assert all(3 <= len(s.split()) <= 25 for s in sentences)


# -------------------------------------------------------------------------------------------- sentence encoder


@pytest.fixture(scope="module")
def corpus_embeddings():
    from privkit.data.text import load_sentence_embeddings

    return load_sentence_embeddings(device="cpu")


def test_sentence_embeddings_basic(corpus_embeddings):
    emb, labels, names, sentences = corpus_embeddings
    n = len(sentences)
    assert emb.shape == (n, 384) and emb.dtype == torch.float32
    assert labels.shape == (n,) and labels.dtype == torch.int64
    assert names == topic_names()
    assert torch.allclose(emb.norm(dim=1), torch.ones(n), atol=1e-5)
    assert torch.isfinite(emb).all()
    ref, _ = sentences_and_labels()
    assert sentences == ref


def test_same_topic_more_similar(corpus_embeddings):
    emb, labels, names, _ = corpus_embeddings
    s = emb @ emb.T
    same = labels[:, None] == labels[None, :]
    off = ~torch.eye(len(labels), dtype=torch.bool)
    within = s[same & off].mean()
    across = s[~same].mean()
    assert within > across + 0.08
    # and for every topic separately
    for k in range(len(names)):
        m = labels == k
        assert s[m][:, m][off[m][:, m]].mean() > s[m][:, ~m].mean()


def test_knn_topic_accuracy(corpus_embeddings):
    emb, labels, names, _ = corpus_embeddings
    s = emb @ emb.T
    s.fill_diagonal_(-2.0)  # leave-one-out
    nn = s.topk(5, dim=1).indices
    votes = torch.zeros(len(labels), len(names)).scatter_add_(1, labels[nn], torch.ones(nn.shape))
    acc = (votes.argmax(1) == labels).float().mean()
    assert acc > 0.6  # chance is 1 / len(names) = 0.1


def test_topic_subset_and_errors(corpus_embeddings):
    from privkit.data.text import embed_sentences, load_sentence_embeddings

    emb_all, labels_all, names_all, sents_all = corpus_embeddings
    emb, labels, names, sentences = load_sentence_embeddings(topics=["music", "cooking"])
    assert names == ("music", "cooking") and len(sentences) == 50
    assert labels.tolist() == [0] * 25 + [1] * 25
    # same sentence, same vector (up to batch-composition float noise)
    j = sents_all.index(sentences[0])
    assert torch.allclose(emb[0], emb_all[j], atol=1e-5)
    with pytest.raises(UnknownNameError, match="topics"):
        load_sentence_embeddings(topics=["cooking", "knitting"])
    with pytest.raises(InvalidArgumentError):
        load_sentence_embeddings(topics=["cooking", "cooking"])
    with pytest.raises(InvalidArgumentError, match="list of topic names"):
        load_sentence_embeddings(topics="cooking")
    with pytest.raises(InvalidArgumentError):
        embed_sentences([])
    with pytest.raises(InvalidArgumentError):
        embed_sentences("a single string")
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        embed_sentences(["x"], batch_size=0)
