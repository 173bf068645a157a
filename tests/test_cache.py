"""The embedding cache: hits and misses, key separation, corruption detection, permissions, clearing."""

from __future__ import annotations

import json
import os
import stat
import warnings

import pytest
import torch

import privkit
from privkit.data.cache import (
    CacheCorruptionWarning,
    cache_key,
    cache_paths,
    cached_embeddings,
    clear_cache,
    content_fingerprint,
)
from privkit.errors import InvalidArgumentError

KEY = dict(encoder="dlib-resnet", dataset="celeba-20", split="test", seed=0)


class Counter:
    """fn() that returns a fixed tensor and counts its calls."""

    def __init__(self, value: torch.Tensor):
        self.value = value
        self.calls = 0

    def __call__(self) -> torch.Tensor:
        self.calls += 1
        return self.value.clone()


@pytest.fixture
def emb():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(12, 5, generator=g)
    return x / x.norm(dim=1, keepdim=True)


@pytest.fixture
def umask022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_miss_then_hit(tmp_path, emb):
    d = tmp_path / "cache"
    fn = Counter(emb)
    a = cached_embeddings(fn, cache_dir=d, **KEY)
    b = cached_embeddings(fn, cache_dir=d, **KEY)
    assert fn.calls == 1
    assert torch.equal(a, emb) and torch.equal(b, emb) and b.dtype == torch.float32
    t, m = cache_paths(cache_dir=d, **KEY)
    assert t.is_file() and m.is_file()
    meta = json.loads(m.read_text())
    assert meta["key"]["encoder"] == "dlib-resnet" and meta["key"]["privkit_version"] == privkit.__version__
    assert meta["shape"] == [12, 5] and meta["dtype"] == "torch.float32" and len(meta["sha256"]) == 64
    assert not [p for p in d.iterdir() if p.name.endswith(".tmp")]  # no temporary files left behind


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64, torch.bfloat16, torch.bool])
def test_dtypes_round_trip(tmp_path, dtype):
    value = (torch.arange(24).reshape(4, 6) % 3).to(dtype)
    fn = Counter(value)
    cached_embeddings(fn, cache_dir=tmp_path / "c", **KEY)
    out = cached_embeddings(fn, cache_dir=tmp_path / "c", **KEY)
    assert fn.calls == 1 and out.dtype == dtype and torch.equal(out, value)


def test_key_separation(tmp_path, emb):
    d = tmp_path / "cache"
    variants = [
        KEY,
        {**KEY, "encoder": "age-gender"},
        {**KEY, "dataset": "vggface2-20"},
        {**KEY, "split": "train"},
        {**KEY, "seed": 1},
        {**KEY, "seed": None},
    ]
    keys = set()
    for i, kw in enumerate(variants):
        fn = Counter(emb + i)
        out = cached_embeddings(fn, cache_dir=d, **kw)
        assert fn.calls == 1 and torch.equal(out, emb + i)
        keys.add(cache_key(**kw))
    for extra in ({"size": 112}, {"size": 64}, {"size": 64, "crop": "center"}):
        fn = Counter(emb)
        cached_embeddings(fn, cache_dir=d, extra=extra, **KEY)
        assert fn.calls == 1
        keys.add(cache_key(extra=extra, **KEY))
    assert len(keys) == len(variants) + 3
    # each earlier entry is still a hit with its own value
    for i, kw in enumerate(variants):
        fn = Counter(torch.zeros(1))
        assert torch.equal(cached_embeddings(fn, cache_dir=d, **kw), emb + i) and fn.calls == 0
    # key order inside extra and tuple-vs-list do not matter
    fn = Counter(emb)
    cached_embeddings(fn, cache_dir=d, extra={"b": (1, 2), "a": 1}, **KEY)
    cached_embeddings(fn, cache_dir=d, extra={"a": 1, "b": [1, 2]}, **KEY)
    assert fn.calls == 1


def test_version_is_part_of_the_key(tmp_path, emb, monkeypatch):
    fn = Counter(emb)
    cached_embeddings(fn, cache_dir=tmp_path, **KEY)
    monkeypatch.setattr(privkit, "__version__", "999.0")
    cached_embeddings(fn, cache_dir=tmp_path, **KEY)
    assert fn.calls == 2


def _recomputes(d, emb) -> bool:
    fn = Counter(emb)
    with pytest.warns(CacheCorruptionWarning):
        out = cached_embeddings(fn, cache_dir=d, **KEY)
    assert torch.equal(out, emb)
    # after the rebuild the entry is valid again
    fn2 = Counter(torch.zeros(1))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheCorruptionWarning)
        assert torch.equal(cached_embeddings(fn2, cache_dir=d, **KEY), emb)
    return fn.calls == 1 and fn2.calls == 0


def test_truncated_tensor_file_is_rebuilt(tmp_path, emb):
    cached_embeddings(Counter(emb), cache_dir=tmp_path, **KEY)
    t, _ = cache_paths(cache_dir=tmp_path, **KEY)
    data = t.read_bytes()
    t.write_bytes(data[: len(data) // 2])
    assert _recomputes(tmp_path, emb)


def test_flipped_byte_is_detected_by_the_hash(tmp_path, emb):
    cached_embeddings(Counter(emb), cache_dir=tmp_path, **KEY)
    t, _ = cache_paths(cache_dir=tmp_path, **KEY)
    data = bytearray(t.read_bytes())
    data[-3] ^= 0x40  # inside the tensor payload: the file still parses
    t.write_bytes(bytes(data))
    from safetensors.torch import load_file

    assert not torch.equal(load_file(str(t))["embeddings"], emb)  # it really is a silent corruption
    assert _recomputes(tmp_path, emb)


def test_missing_or_foreign_metadata_is_rebuilt(tmp_path, emb):
    cached_embeddings(Counter(emb), cache_dir=tmp_path, **KEY)
    t, m = cache_paths(cache_dir=tmp_path, **KEY)
    m.unlink()
    assert _recomputes(tmp_path, emb)
    meta = json.loads(m.read_text())
    meta["sha256"] = "0" * 64
    m.write_text(json.dumps(meta))
    assert _recomputes(tmp_path, emb)
    meta = json.loads(m.read_text())
    meta["key"]["seed"] = 7
    m.write_text(json.dumps(meta))
    assert _recomputes(tmp_path, emb)
    m.write_text("{not json")
    assert _recomputes(tmp_path, emb)
    t.unlink()
    assert _recomputes(tmp_path, emb)


def test_permissions(tmp_path, emb, umask022):
    d = tmp_path / "a" / "cache"
    cached_embeddings(Counter(emb), cache_dir=d, **KEY)
    assert _mode(d) == 0o700
    for p in d.iterdir():
        assert _mode(p) == 0o600, p.name
    # a pre-existing directory readable by others is reported, not silently used
    open_dir = tmp_path / "shared"
    open_dir.mkdir()
    os.chmod(open_dir, 0o755)
    with pytest.warns(UserWarning, match="chmod 700"):
        cached_embeddings(Counter(emb), cache_dir=open_dir, **KEY)
    assert _mode(open_dir) == 0o755


def test_clear_cache_removes_only_cache_files(tmp_path, emb):
    d = tmp_path / "cache"
    cached_embeddings(Counter(emb), cache_dir=d, **KEY)
    cached_embeddings(Counter(emb), cache_dir=d, **{**KEY, "seed": 3})
    (d / "notes.txt").write_text("keep me")
    assert clear_cache(d) == 4
    assert [p.name for p in d.iterdir()] == ["notes.txt"]
    fn = Counter(emb)
    cached_embeddings(fn, cache_dir=d, **KEY)
    assert fn.calls == 1
    (d / "notes.txt").unlink()
    assert clear_cache(d) == 2 and not d.exists()
    assert clear_cache(d) == 0


def test_device_argument_and_validation(tmp_path, emb):
    out = cached_embeddings(Counter(emb), cache_dir=tmp_path, device="cpu", **KEY)
    assert out.device.type == "cpu"
    with pytest.raises(InvalidArgumentError, match="fn must return a torch.Tensor"):
        cached_embeddings(lambda: [1, 2], cache_dir=tmp_path / "x", **KEY)
    with pytest.raises(InvalidArgumentError, match="callable"):
        cached_embeddings(emb, cache_dir=tmp_path, **KEY)
    with pytest.raises(InvalidArgumentError, match="encoder"):
        cached_embeddings(Counter(emb), cache_dir=tmp_path, **{**KEY, "encoder": ""})
    with pytest.raises(InvalidArgumentError, match="seed"):
        cached_embeddings(Counter(emb), cache_dir=tmp_path, **{**KEY, "seed": 0.5})
    with pytest.raises(InvalidArgumentError, match="JSON"):
        cached_embeddings(Counter(emb), cache_dir=tmp_path, extra={"f": object()}, **KEY)
    with pytest.raises(InvalidArgumentError, match="JSON"):
        cache_key(extra={"x": float("nan")}, **KEY)
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(InvalidArgumentError, match="not a directory"):
        clear_cache(f)


def test_input_content_is_part_of_the_key(tmp_path, emb):
    """Same name, seed and size but other pixels: a miss (stale embeddings of edited data are never returned)."""
    d = tmp_path / "cache"
    images = torch.rand(4, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    boxes = torch.tensor([[0.0, 0.0, 8.0, 8.0]]).repeat(4, 1)
    fn = Counter(emb)
    cached_embeddings(fn, cache_dir=d, inputs=(images, boxes), **KEY)
    cached_embeddings(fn, cache_dir=d, inputs=(images.clone(), boxes.clone()), **KEY)  # same content: a hit
    assert fn.calls == 1
    edited = images.clone()
    edited[2, 1, 3, 3] += 1e-6
    cached_embeddings(fn, cache_dir=d, inputs=(edited, boxes), **KEY)
    assert fn.calls == 2
    cached_embeddings(fn, cache_dir=d, inputs=(images, boxes - 1.0), **KEY)  # other boxes
    assert fn.calls == 3
    cached_embeddings(fn, cache_dir=d, **KEY)  # no inputs given: its own key
    assert fn.calls == 4
    # dtype and shape count, not just the bytes
    z = torch.zeros(4, dtype=torch.float32)
    assert content_fingerprint(z) != content_fingerprint(z.view(torch.int32))
    assert content_fingerprint(z) != content_fingerprint(z.reshape(2, 2))
    assert content_fingerprint(images[:, :, ::2]) == content_fingerprint(images[:, :, ::2].contiguous())
    with pytest.raises(InvalidArgumentError, match="inputs"):
        cached_embeddings(fn, cache_dir=d, inputs=[images, "boxes"], **KEY)
