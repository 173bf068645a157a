"""The shared layer below the four wings: verification metrics (privkit.metrics) and image transforms
(privkit.transforms). One implementation each; the wings call these."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from privkit.errors import InsufficientDataError, InvalidArgumentError, ShapeError, UnknownNameError
from privkit.metrics import (
    DEFAULT_MIN_FALSE_ACCEPTS,
    auc,
    pair_auc,
    resolvable_far,
    smallest_resolvable_far,
    tar_at_far,
    wilson_interval,
)
from privkit.transforms import gaussian_blur, resize, square_frames


# -- the one resolvable-FAR rule ----------------------------------------------------------------------------------
def test_one_resolvable_far_rule():
    assert DEFAULT_MIN_FALSE_ACCEPTS == 10
    assert smallest_resolvable_far(10_000) == pytest.approx(1e-3)
    assert smallest_resolvable_far(0) == math.inf
    assert resolvable_far(1e-2, 10_000) == 1e-2  # resolvable: unchanged
    assert resolvable_far(1e-4, 10_000) == pytest.approx(1e-3)  # raised to the floor
    assert resolvable_far(1e-4, 100, min_false_accepts=1) == pytest.approx(1e-2)
    with pytest.raises(InsufficientDataError, match="n_impostor_pairs"):
        resolvable_far(1e-2, 9)
    with pytest.raises(InvalidArgumentError, match="far"):
        resolvable_far(0.0, 100)
    # tar_at_far reports NaN, never a number, below the floor
    g = torch.linspace(0.5, 1.0, 50, dtype=torch.float64)
    i = torch.linspace(-1.0, 0.6, 1000, dtype=torch.float64)
    df = tar_at_far(g, i, fars=(1e-1, 1e-2, 1e-3))
    assert df.resolvable.tolist() == [True, True, False]
    assert math.isnan(df.tar.iloc[2]) and df.realised_far.iloc[0] <= 1e-1


def test_wilson_interval_ends_and_coverage():
    assert wilson_interval(0, 20)[0] == 0.0 and wilson_interval(20, 20)[1] == 1.0
    lo, hi = wilson_interval(10, 20)
    assert lo < 0.5 < hi and hi - 0.5 == pytest.approx(0.5 - lo)
    assert all(math.isnan(v) for v in wilson_interval(0, 0))
    # coverage of the 95% interval over binomial draws stays near its level
    gen = torch.Generator().manual_seed(0)
    p, n = 0.3, 60
    k = torch.binomial(torch.full((4000,), float(n)), torch.full((4000,), p), generator=gen).int().tolist()
    cover = sum(lo <= p <= hi for lo, hi in (wilson_interval(x, n) for x in k)) / len(k)
    assert 0.92 < cover < 0.98


def test_pair_auc_over_a_similarity_matrix():
    z = F.normalize(torch.randn(30, 8, generator=torch.Generator().manual_seed(1)), dim=1)
    labels = torch.arange(30) % 5
    s = z @ z.T
    i, j = torch.triu_indices(30, 30, offset=1)
    same = labels[i] == labels[j]
    assert pair_auc(s, labels) == pytest.approx(auc(s[i, j][same].double(), s[i, j][~same].double()))
    perfect = (labels[:, None] == labels[None, :]).double()
    assert pair_auc(perfect, labels) == 1.0
    with pytest.raises(ShapeError):
        pair_auc(s[:, :5], labels)
    with pytest.raises(InsufficientDataError):
        pair_auc(s[:5, :5], torch.arange(5))


# -- the one blur -------------------------------------------------------------------------------------------------
def test_blur_is_a_separable_reflect_gaussian():
    x = torch.rand(2, 3, 20, 24, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = gaussian_blur(x, 2.0, radius=3)
    t = torch.arange(7, dtype=torch.float64) - 3
    k1 = torch.exp(-t * t / 8)
    k2 = torch.outer(k1, k1) / k1.sum() ** 2
    ref = F.conv2d(F.pad(x.reshape(6, 1, 20, 24), (3, 3, 3, 3), mode="reflect"), k2.view(1, 1, 7, 7))
    assert torch.allclose(y, ref.reshape(2, 3, 20, 24), atol=1e-12)
    assert gaussian_blur(x, 2.0).shape == x.shape  # default radius ceil(3 sigma) = 6
    assert torch.equal(gaussian_blur(x, 0.0), x)
    const = torch.full((1, 3, 8, 8), 0.3)
    for padding in ("reflect", "replicate"):
        assert torch.allclose(gaussian_blur(const, 1.0, padding=padding), const, atol=1e-6)
    # replicate padding takes any radius; reflect needs radius < side unless clipped
    assert torch.allclose(gaussian_blur(const, 5.0, padding="replicate"), const, atol=1e-6)
    with pytest.raises(InvalidArgumentError, match="radius"):
        gaussian_blur(const, 5.0)
    assert gaussian_blur(const, 5.0, clip_radius=True).shape == const.shape
    with pytest.raises(InvalidArgumentError, match="sigma"):
        gaussian_blur(x, -1.0)
    with pytest.raises(UnknownNameError, match="padding"):
        gaussian_blur(x, 1.0, padding="zeros")
    with pytest.raises(ShapeError, match="images"):
        gaussian_blur(x[0], 1.0)


def test_resize_is_antialiased_bilinear():
    x = torch.rand(2, 3, 40, 40, generator=torch.Generator().manual_seed(2))
    y = resize(x, 20)
    ref = F.interpolate(x, size=(20, 20), mode="bilinear", align_corners=False, antialias=True)
    assert torch.equal(y, ref) and resize(x, (10, 30)).shape == (2, 3, 10, 30)
    with pytest.raises(InvalidArgumentError, match="size"):
        resize(x, 0)
    with pytest.raises(ShapeError):
        resize(x.long(), 10)


def test_square_frames_centre_the_longer_side_with_margin():
    boxes = torch.tensor([[2.0, 3.0, 6.0, 11.0], [0.0, 0.0, 10.0, 4.0]], dtype=torch.float64)
    cx, cy, side = square_frames(boxes, 0.25)
    assert cx.tolist() == [4.0, 5.0] and cy.tolist() == [7.0, 2.0] and side.tolist() == [12.0, 15.0]
    assert cx.dtype == torch.float64
    assert square_frames(boxes)[2].tolist() == [8.0, 10.0]  # no margin: the longer side itself
    with pytest.raises(ShapeError, match="boxes"):
        square_frames(torch.zeros(3, 3))
    with pytest.raises(InvalidArgumentError, match="margin"):
        square_frames(boxes, -0.1)


def test_every_face_crop_uses_the_shared_square_frame():
    """The four face crops (npm face models, MTCNN's ONet, the inversion attacks, SynthesisNet's alignment) place the
    same square around a box: each one's crop of a box whose square is exactly the image equals the whole image."""
    from privkit.encoders.human_faces import square_face_crops
    from privkit.encoders.mtcnn_onet import square_crops
    from privkit.isp.inversion import face_crops
    from privkit.synthesisnet.data import square_crop_boxes

    img = torch.rand(1, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    box = torch.tensor([[2.0, 2.0, 6.0, 6.0]])  # margin 0.5: the square is the whole 8 x 8 image
    assert torch.equal(square_face_crops(img, box, size=8, margin=0.5), img)
    assert torch.allclose(face_crops(img, box, size=8, margin=0.5)[0], img, atol=1e-6)
    assert square_crop_boxes(box, margin=0.5).tolist() == [[0.0, 0.0, 8.0, 8.0]]
    assert torch.allclose(square_crops(img, torch.tensor([[0.0, 0.0, 8.0, 8.0]]), 8), img)


# -- linear algebra ---------------------------------------------------------------------------------------------
def test_top_singular_directions_match_the_svd_on_every_route():
    from privkit.linalg import numerical_rank, top_singular_directions

    g = torch.Generator().manual_seed(0)
    for m, d in ((5, 12), (12, 5)):
        rows = torch.randn(m, d, generator=g, dtype=torch.float64)
        _, s_ref, vh_ref = torch.linalg.svd(rows, full_matrices=False)
        r = min(m, d)
        for solver in ("gram", "svd"):
            u, s = top_singular_directions(rows, solver=solver)
            assert torch.allclose(s[:r], s_ref, rtol=1e-10, atol=1e-12)
            # the same directions up to sign, orthonormal
            assert torch.allclose((u[:, :r].T @ vh_ref.T).abs(), torch.eye(r, dtype=torch.float64), atol=1e-8)
            assert numerical_rank(s) == r


def test_top_singular_directions_zero_the_directions_of_vanishing_values():
    from privkit.linalg import numerical_rank, top_singular_directions

    g = torch.Generator().manual_seed(1)
    rows = torch.randn(2, 9, generator=g, dtype=torch.float64)
    rows = torch.cat([rows, rows.sum(0, keepdim=True)])  # rank 2 in 3 rows
    u, s = top_singular_directions(rows)
    assert numerical_rank(s) == 2 and bool((u[:, 2] == 0).all())
    assert numerical_rank(torch.zeros(3, dtype=torch.float64)) == 0
    assert numerical_rank(torch.zeros(0, dtype=torch.float64)) == 0


def test_top_singular_directions_bad_inputs():
    from privkit.linalg import top_singular_directions

    ok = torch.ones(3, 4, dtype=torch.float64)
    for bad, err in ((torch.ones(3), ShapeError), (torch.ones(0, 4), ShapeError),
                     (torch.ones(3, 4, dtype=torch.long), InvalidArgumentError),
                     (torch.full((3, 4), float("nan")), InvalidArgumentError)):
        with pytest.raises(err, match="rows"):
            top_singular_directions(bad)
    with pytest.raises(UnknownNameError, match="solver"):
        top_singular_directions(ok, solver="qr")
    with pytest.raises(InvalidArgumentError, match="rtol"):
        top_singular_directions(ok, rtol=0.0)
