"""Template-inversion audit (paper 1, docs/isp.md §5): can an image be rebuilt from a leaked embedding?

The paper audits four generative inversion attacks (DiffMI, ALSUV, Vec2Face, and "Bob"). privkit implements two
small, self-contained families that stand in for them (none of the paper's pretrained generators is available
offline):

* **Regression** (:func:`train_regression_inverter`, stands for **Vec2Face** and the learned embedding→image mapping
  of the **Bob** template-inversion pipeline): a small convolutional decoder is trained on *auxiliary* identities to
  map embeddings to images (pixel MSE, plus optionally an embedding-consistency loss when the attacked encoder is a
  differentiable torch module), then applied to the target embeddings.
  :class:`RidgeDecoder` (:func:`train_ridge_inverter`) is the closed-form linear member of the same family: ridge
  regression from the embedding to the pixels, its penalty chosen by identity-grouped cross-validation on the
  auxiliary set — the standard cheap baseline of learned inversion, and on small auxiliary sets a stronger one than
  the convolutional decoder, which tends to collapse to the mean face.
* **Optimisation** (:func:`optimisation_attack`, stands for **ALSUV**'s latent search): gradient descent on the latent
  of a decoder/generator (or directly on pixels) to maximise the cosine between the attacked encoder's embedding of
  the reconstruction and the target embedding, for differentiable encoders (torch modules). Several restarts are run
  and the one the *attacker* scores best (highest attacked-encoder cosine — no target image is used) is kept, the
  spirit of ALSUV's averaged latents with unsupervised validation. DiffMI (diffusion-based) has no counterpart here.

Success (:func:`inversion_success`): the reconstruction x̂ passes verification against the target image with a
*reference* encoder the attack did not use, at the reference encoder's FAR = 1e-3 threshold computed on a held-out
labelled set (:func:`reference_threshold`; privkit's choice — the paper's thresholds were not found). Rates come with
Wilson 95% intervals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import torch

from .._validate import check_choice, check_int, check_nonnegative, check_positive, check_probability, check_tensor
from ..errors import InsufficientDataError, InvalidArgumentError, ShapeError
from ..metrics import DEFAULT_MIN_FALSE_ACCEPTS, wilson_interval
from ..encoders.base import embed_images
from ..transforms import square_frames
from .attribution import EncoderLike, _check_images
from .probes import _init_
from .verification import VerificationPairs, pair_threshold

__all__ = ["ConvDecoder", "face_crops", "paste_crops", "RidgeDecoder", "ridge_predict", "train_ridge_inverter",
           "train_regression_inverter", "optimisation_attack", "reference_threshold", "InversionResult",
           "inversion_success", "inversion_audit", "describe_inversion_evidence"]


class ConvDecoder(torch.nn.Module):
    """A small decoder from a D-dimensional embedding/latent to a (3, H, W) image in [0, 1].

    Linear(D → C·h₀·w₀) → ``n_upsample`` × [nearest ×2 upsampling, 3×3 conv, ReLU] (channels halve each time, at least
    16) → 3×3 conv to 3 channels → sigmoid, with h₀ = H / 2^n_upsample (H and W must be divisible by it).

    Args:
        embed_dim: input dimension D.
        image_size: (H, W).
        channels: channels C at the lowest resolution.
        n_upsample: number of ×2 stages (default: as many as keep h₀, w₀ ≥ 4, at most 4).
        generator: seeds the initialisation.
    """

    def __init__(self, embed_dim: int, image_size: tuple[int, int] = (32, 32), *, channels: int = 64,
                 n_upsample: int | None = None, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.embed_dim = check_int("embed_dim", embed_dim, minimum=1)
        h, w = (check_int("image_size", s, minimum=1) for s in image_size)
        if n_upsample is None:
            n_upsample = 0
            while n_upsample < 4 and h % (2 ** (n_upsample + 1)) == 0 and w % (2 ** (n_upsample + 1)) == 0 and min(h, w) // 2 ** (n_upsample + 1) >= 4:
                n_upsample += 1
        n_upsample = check_int("n_upsample", n_upsample, minimum=0)
        f = 2**n_upsample
        if h % f or w % f:
            raise InvalidArgumentError(f"image_size {(h, w)} must be divisible by 2**n_upsample = {f}")
        self.image_size = (h, w)
        self.base = (h // f, w // f)
        self.c0 = cin = check_int("channels", channels, minimum=1)
        self.fc = torch.nn.Linear(self.embed_dim, cin * self.base[0] * self.base[1])
        layers: list[torch.nn.Module] = []
        for _ in range(n_upsample):
            cout = max(16, cin // 2)
            layers += [torch.nn.Upsample(scale_factor=2, mode="nearest"), torch.nn.Conv2d(cin, cout, 3, padding=1), torch.nn.ReLU()]
            cin = cout
        self.body = torch.nn.Sequential(*layers, torch.nn.Conv2d(cin, 3, 3, padding=1))
        _init_(self, generator)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.fc(z)).view(z.shape[0], self.c0, *self.base)
        return torch.sigmoid(self.body(x))


# ---------------------------------------------------------------------------------------------------------------------
# Aligned face crops
# ---------------------------------------------------------------------------------------------------------------------
def _check_boxes(boxes: torch.Tensor, n: int, name: str = "boxes") -> torch.Tensor:
    check_tensor(name, boxes, shape=(n, 4), finite=True)
    b = boxes.float()
    if n and not bool(((b[:, 2] > b[:, 0]) & (b[:, 3] > b[:, 1])).all()):
        raise InvalidArgumentError(f"{name} must be xyxy pixel boxes with x1 > x0 and y1 > y0 for every row")
    return b


def _affine_sample(source: torch.Tensor, like: torch.Tensor, scale_x: torch.Tensor, scale_y: torch.Tensor,
                   shift_x: torch.Tensor, shift_y: torch.Tensor,
                   out_hw: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(grid, samples): ``source`` sampled (bilinear, border padding) on the per-image axis-aligned affine grid
    x' = scale·x + shift of size ``out_hw``, with the affine matrices in ``like``'s dtype and device."""
    theta = like.new_zeros(source.shape[0], 2, 3)
    theta[:, 0, 0], theta[:, 1, 1], theta[:, 0, 2], theta[:, 1, 2] = scale_x, scale_y, shift_x, shift_y
    grid = torch.nn.functional.affine_grid(theta, [source.shape[0], 3, *out_hw], align_corners=False)
    return grid, torch.nn.functional.grid_sample(source.float(), grid, mode="bilinear", padding_mode="border",
                                                 align_corners=False)


def face_crops(images: torch.Tensor, boxes: torch.Tensor, *, size: int = 32,
               margin: float = 0.2) -> tuple[torch.Tensor, torch.Tensor]:
    """Square crops centred on each face box, resized to ``size`` × ``size`` (bilinear, differentiable).

    The crop's side is the box's longer side times (1 + 2·``margin``) — ``margin`` of that side is kept on each side of
    the face. Parts of the crop outside the image repeat the border pixels. These are the aligned-face targets of the
    inversion attacks (template-inversion work inverts to face crops, not to whole scenes).

    Args:
        images: (N, 3, H, W) in [0, 1].
        boxes: (N, 4) xyxy face boxes in pixels.
        size: side of the crops in pixels.
        margin: context kept around the face, as a fraction of the box's longer side (≥ 0).

    Returns:
        (crops (N, 3, size, size) in [0, 1], the face boxes in crop pixels (N, 4) xyxy).
    """
    _check_images(images)
    b = _check_boxes(boxes, images.shape[0]).to(images.device)
    size = check_int("size", size, minimum=4)
    h, w = images.shape[-2:]
    cx, cy, side = square_frames(b, margin)  # checks margin >= 0
    _, crops = _affine_sample(images, images, side / w, side / h, 2 * cx / w - 1, 2 * cy / h - 1, (size, size))
    inner = torch.stack([(b[:, 0] - cx) / side, (b[:, 1] - cy) / side, (b[:, 2] - cx) / side, (b[:, 3] - cy) / side], 1)
    return crops.clamp(0, 1), ((inner + 0.5) * size).float()


def paste_crops(canvas: torch.Tensor, crops: torch.Tensor, boxes: torch.Tensor, *, margin: float = 0.2) -> torch.Tensor:
    """Put crops back into whole images: the inverse of :func:`face_crops` (bilinear, differentiable in both inputs).

    Each crop covers the square frame :func:`face_crops` would cut around ``boxes`` (same ``margin``) in ``canvas``;
    canvas pixels outside the frame are kept.

    Args:
        canvas: (N, 3, H, W) whole images (e.g. an estimate of the scene).
        crops: (N, 3, S, S) face crops.
        boxes: (N, 4) xyxy face boxes in ``canvas`` pixels.
        margin: as in :func:`face_crops`.

    Returns:
        (N, 3, H, W) composites.
    """
    _check_images(canvas, "canvas")
    _check_images(crops, "crops")
    n, _, h, w = canvas.shape
    if crops.shape[0] != n:
        raise ShapeError(f"canvas and crops must have the same length, got {n} and {crops.shape[0]}")
    cx, cy, side = square_frames(_check_boxes(boxes, n).to(canvas.device), margin)  # checks margin >= 0
    # canvas pixel (normalised) -> crop coordinates (normalised): u = (x·W/2 + W/2 − cx) · 2/side
    grid, sampled = _affine_sample(crops, canvas, w / side, h / side, (w - 2 * cx) / side, (h - 2 * cy) / side, (h, w))
    inside = ((grid.abs() <= 1).all(-1)).unsqueeze(1).to(canvas.dtype)
    return canvas * (1 - inside) + sampled * inside


# ---------------------------------------------------------------------------------------------------------------------
# Closed-form (ridge) inversion
# ---------------------------------------------------------------------------------------------------------------------
class RidgeDecoder(torch.nn.Module):
    """A linear decoder x̂ = clamp(mean_x + (z − mean_z) W, 0, 1), reshaped to ``output_shape``.

    Fitted in closed form by :func:`train_ridge_inverter`; differentiable in ``z`` (usable as the generator of the
    optimisation attack).

    Attributes:
        embed_dim: input dimension D (the latent size :func:`optimisation_attack` reads).
        output_shape: shape of one output, e.g. (3, 32, 32).
        lam: the ridge penalty used.
    """

    def __init__(self, weight: torch.Tensor, z_mean: torch.Tensor, x_mean: torch.Tensor, output_shape: tuple[int, ...],
                 *, lam: float = math.nan) -> None:
        super().__init__()
        check_tensor("weight", weight, ndim=2, finite=True)
        d, p = weight.shape
        check_tensor("z_mean", z_mean, shape=(d,), finite=True)
        check_tensor("x_mean", x_mean, shape=(p,), finite=True)
        if math.prod(output_shape) != p:
            raise ShapeError(f"output_shape {tuple(output_shape)} has {math.prod(output_shape)} values, weight has {p} columns")
        for name, t in (("weight", weight), ("z_mean", z_mean), ("x_mean", x_mean)):
            self.register_buffer(name, t.float())
        self.embed_dim = d
        self.output_shape = tuple(int(s) for s in output_shape)
        self.lam = float(lam)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        x = self.x_mean + (z.float() - self.z_mean) @ self.weight
        return x.clamp(0, 1).view(z.shape[0], *self.output_shape)


def _ridge_fit(z: torch.Tensor, y: torch.Tensor, lam: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Ridge fit of y on z with an unpenalised intercept: (mean of z, mean of y, W = Zcᵀ (Zc Zcᵀ + λI)⁻¹ Yc), Zc and
    Yc the centred z and y (float64 inputs; N ≤ D or not, the N × N system is what the aux sets need)."""
    zm, ym = z.mean(0), y.mean(0)
    zc = z - zm
    k = zc @ zc.T
    k.diagonal().add_(lam)
    return zm, ym, zc.T @ torch.linalg.solve(k, y - ym)


def ridge_predict(z_fit: torch.Tensor, y_fit: torch.Tensor, z: torch.Tensor, *, lam: float) -> torch.Tensor:
    """Closed-form ridge regression (intercept unpenalised) fitted on (z_fit, y_fit), applied to z; float64 solve.

    Args:
        z_fit: (N, D) inputs; y_fit: (N, P) targets; z: (M, D) inputs to predict for; lam: the penalty (> 0).

    Returns:
        (M, P) predictions in z's float dtype.
    """
    check_tensor("z_fit", z_fit, ndim=2, finite=True, floating=True)
    check_tensor("y_fit", y_fit, shape=(z_fit.shape[0], None), finite=True, floating=True)
    check_tensor("z", z, shape=(None, z_fit.shape[1]), finite=True, floating=True)
    lam = check_positive("lam", lam)
    zm, ym, w = _ridge_fit(z_fit.double(), y_fit.double().to(z_fit.device), lam)
    return (ym + (z.double().to(z_fit.device) - zm) @ w).to(z.dtype)


def _check_aux_images(aux_images: torch.Tensor) -> int:
    """The number of auxiliary images (at least 2, checked with the images' shape)."""
    _check_images(aux_images, "aux_images")
    if aux_images.shape[0] < 2:
        raise InsufficientDataError(f"aux_images: need at least 2 auxiliary images, got {aux_images.shape[0]}")
    return aux_images.shape[0]


def train_ridge_inverter(aux_embeddings: torch.Tensor, aux_images: torch.Tensor, *, groups: torch.Tensor | None = None,
                         lambdas: Sequence[float] = (1e-3, 1e-2, 1e-1, 1.0, 10.0), folds: int = 5,
                         seed: int = 0) -> tuple[RidgeDecoder, pd.DataFrame]:
    """Regression inversion in closed form: ridge regression from embeddings to pixels (linear Vec2Face-family baseline).

    λ is chosen from ``lambdas`` by ``folds``-fold cross-validation on the auxiliary set, folds formed by *groups*
    (identities: a held-out fold has no identity seen in training, as at attack time), minimising pixel MSE; the
    decoder is then refitted on all auxiliary images. float64 solves of the N × N kernel system.

    Args:
        aux_embeddings: (N, D) embeddings of the auxiliary images (the attacked encoder's, possibly sanitised).
        aux_images: (N, C, H, W) auxiliary images in [0, 1] (e.g. :func:`face_crops`).
        groups: (N,) identity labels for the folds (None: every image its own group).
        lambdas: candidate penalties (> 0).
        folds: number of cross-validation folds (≥ 2, at most the number of groups).
        seed: seeds the assignment of groups to folds.

    Returns:
        (decoder, DataFrame of lam, cv_mse, chosen).
    """
    n = _check_aux_images(aux_images)
    check_tensor("aux_embeddings", aux_embeddings, shape=(n, None), finite=True, floating=True)
    lams = [check_positive("lambdas", v) for v in lambdas]
    if not lams:
        raise InvalidArgumentError("lambdas must hold at least one penalty")
    g = torch.arange(n) if groups is None else groups.reshape(-1).cpu()
    check_tensor("groups", g, shape=(n,))
    uniq, inv = torch.unique(g, return_inverse=True)
    folds = check_int("folds", folds, minimum=2)
    if folds > uniq.numel():
        raise InsufficientDataError(f"groups: {folds} folds need at least {folds} groups, got {uniq.numel()}")
    gen = torch.Generator().manual_seed(int(seed))
    fold_of_group = torch.empty(uniq.numel(), dtype=torch.long)
    fold_of_group[torch.randperm(uniq.numel(), generator=gen)] = torch.arange(uniq.numel()) % folds
    fold = fold_of_group[inv].to(aux_images.device)
    z, y = aux_embeddings.to(aux_images.device).double(), aux_images.flatten(1).double()
    rows = []
    for lam in lams:
        err = 0.0
        for f in range(folds):
            tr, te = fold != f, fold == f
            zm, ym, w = _ridge_fit(z[tr], y[tr], lam)
            pred = (ym + (z[te] - zm) @ w).clamp(0, 1)
            err += float(((pred - y[te]) ** 2).sum())
        rows.append({"lam": lam, "cv_mse": err / y.numel()})
    table = pd.DataFrame(rows)
    best = float(table.lam[table.cv_mse.idxmin()])
    table["chosen"] = table.lam == best
    zm, ym, w = _ridge_fit(z, y, best)
    return RidgeDecoder(w, zm, ym, tuple(aux_images.shape[1:]), lam=best).to(aux_images.device), table


def _require_module(name: str, encoder: object) -> torch.nn.Module:
    if not isinstance(encoder, torch.nn.Module):
        raise InvalidArgumentError(f"{name} must be a differentiable torch.nn.Module (images -> embeddings) for this "
                                   f"attack, got {type(encoder).__name__}")
    return encoder


def _forward_embed(encoder: torch.nn.Module, images: torch.Tensor) -> torch.Tensor:
    """Differentiable embedding (bypasses ``Encoder.embed``, which runs without gradients)."""
    out = encoder._embed_batch(images, None) if hasattr(encoder, "_embed_batch") else encoder(images)
    return torch.nn.functional.normalize(out, dim=1)


class _Frozen:
    """Temporarily stop gradients into a module's parameters (restored on exit); ``None`` freezes nothing."""

    def __init__(self, module: torch.nn.Module | None) -> None:
        self.params = [] if module is None else [p for p in module.parameters() if p.requires_grad]

    def __enter__(self) -> None:
        for p in self.params:
            p.requires_grad_(False)

    def __exit__(self, *exc) -> None:
        for p in self.params:
            p.requires_grad_(True)


def train_regression_inverter(encoder: EncoderLike, aux_images: torch.Tensor, *,
                              aux_embeddings: torch.Tensor | None = None, epochs: int = 60, lr: float = 2e-3,
                              batch_size: int = 64, embedding_loss_weight: float = 0.0, channels: int = 64,
                              n_upsample: int | None = None, seed: int = 0) -> tuple[ConvDecoder, pd.DataFrame]:
    """Regression inversion (Vec2Face-like): train a decoder embedding → image on auxiliary identities.

    Args:
        encoder: the attacked encoder (used to embed ``aux_images`` unless ``aux_embeddings`` is given, and for the
            embedding loss, which needs a torch module).
        aux_images: (N, 3, H, W) auxiliary images in [0, 1] (identities disjoint from the targets).
        aux_embeddings: their embeddings, if already computed.
        epochs, lr, batch_size: Adam training set-up.
        embedding_loss_weight: weight of 1 − cos(f(x̂), z) added to the pixel MSE (0: pixels only).
        channels, n_upsample: decoder size (:class:`ConvDecoder`).
        seed: seeds initialisation and shuffling.

    Returns:
        (decoder in eval mode, DataFrame of epoch, loss). Apply it as ``decoder(target_embeddings)``.
    """
    n = _check_aux_images(aux_images)
    z = embed_images(encoder, aux_images) if aux_embeddings is None else aux_embeddings
    check_tensor("aux_embeddings", z, shape=(n, None), floating=True)
    w_emb = check_nonnegative("embedding_loss_weight", embedding_loss_weight)
    enc_mod = _require_module("encoder", encoder) if w_emb > 0 else None
    epochs = check_int("epochs", epochs, minimum=1)
    lr = check_positive("lr", lr)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    gen = torch.Generator().manual_seed(int(seed))
    dev = aux_images.device
    dec = ConvDecoder(z.shape[1], tuple(aux_images.shape[-2:]), channels=channels, n_upsample=n_upsample,
                      generator=gen).to(dev)
    opt = torch.optim.Adam(dec.parameters(), lr=lr)
    x, z = aux_images.float(), z.to(dev).float()
    history = []
    with _Frozen(enc_mod):
        dec.train()
        for epoch in range(1, epochs + 1):
            perm = torch.randperm(n, generator=gen).to(dev)
            total = 0.0
            for s in range(0, n, batch_size):
                idx = perm[s : s + batch_size]
                rec = dec(z[idx])
                loss = torch.nn.functional.mse_loss(rec, x[idx])
                if enc_mod is not None:
                    loss = loss + w_emb * (1 - (_forward_embed(enc_mod, rec) * z[idx]).sum(1)).mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += float(loss.detach()) * idx.numel()
            history.append({"epoch": epoch, "loss": total / n})
    dec.eval()
    return dec, pd.DataFrame(history)


def optimisation_attack(encoder: torch.nn.Module, target_embeddings: torch.Tensor, *,
                        image_size: tuple[int, int] | None = None, decoder: torch.nn.Module | None = None,
                        steps: int = 200, lr: float = 0.05, restarts: int = 1, tv_weight: float = 0.0,
                        seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Optimisation inversion (ALSUV-like): gradient descent to match the target embedding.

    With a ``decoder`` (any torch module latent → image in [0, 1], e.g. a :class:`ConvDecoder` trained by
    :func:`train_regression_inverter`), the decoder's input latent is optimised, initialised at the target embedding
    (plus noise for restarts > 1) when the dimensions agree, else at random. Without one, pixels are optimised through
    a sigmoid parameterisation from a grey image plus noise.

    Loss: 1 − cos(f(x̂), z_target) + ``tv_weight`` · total variation(x̂). Adam, ``steps`` iterations. Of the
    ``restarts`` candidates per target, the one with the highest final cos(f(x̂), z_target) is kept.

    Args:
        encoder: the attacked, differentiable encoder (torch module; its parameters are not changed).
        target_embeddings: (T, D) leaked embeddings.
        image_size: (H, W) for pixel optimisation (required without a decoder).
        decoder: optional generator whose latent is searched.
        steps, lr, restarts, tv_weight: optimisation set-up.
        seed: seeds initial latents / pixels.

    Returns:
        (reconstructions (T, 3, H, W) in [0, 1], final attacked-encoder cosines (T,)).
    """
    enc = _require_module("encoder", encoder)
    check_tensor("target_embeddings", target_embeddings, ndim=2, floating=True)
    steps = check_int("steps", steps, minimum=1)
    lr = check_positive("lr", lr)
    restarts = check_int("restarts", restarts, minimum=1)
    tv_weight = check_nonnegative("tv_weight", tv_weight)
    gen = torch.Generator().manual_seed(int(seed))
    target = torch.nn.functional.normalize(target_embeddings.float(), dim=1)
    dev = target.device
    t = target.shape[0]
    if decoder is None:
        if image_size is None:
            raise InvalidArgumentError("image_size must be given for pixel optimisation (no decoder)")
        h, w = (check_int("image_size", s, minimum=1) for s in image_size)
    best_x, best_cos = None, torch.full((t,), -math.inf, device=dev)
    with _Frozen(enc), _Frozen(decoder):
        for r in range(restarts):
            if decoder is not None:
                latent_dim = getattr(decoder, "embed_dim", None)
                if latent_dim is None:
                    raise InvalidArgumentError("decoder must expose its latent size as .embed_dim")
                if latent_dim == target.shape[1]:
                    init = target.clone()
                    if r > 0:
                        init = init + 0.1 * torch.randn(init.shape, generator=gen).to(dev)
                else:
                    init = torch.randn(t, latent_dim, generator=gen).to(dev)
                render = decoder
            else:
                init = 0.1 * torch.randn(t, 3, h, w, generator=gen).to(dev)
                render = torch.sigmoid
            param = init.requires_grad_(True)
            opt = torch.optim.Adam([param], lr=lr)
            for _ in range(steps):
                x = render(param)
                loss = (1 - (_forward_embed(enc, x) * target).sum(1)).mean()
                if tv_weight > 0:
                    tv = (x[..., 1:, :] - x[..., :-1, :]).abs().mean() + (x[..., :, 1:] - x[..., :, :-1]).abs().mean()
                    loss = loss + tv_weight * tv
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            with torch.no_grad():
                x = render(param)
                cos = (_forward_embed(enc, x) * target).sum(1)
                if best_x is None:
                    best_x = x.clone()
                better = cos > best_cos
                best_x[better] = x[better]
                best_cos = torch.where(better, cos, best_cos)
    return best_x.detach(), best_cos.detach()


@torch.no_grad()
def reference_threshold(reference_encoder: EncoderLike, images: torch.Tensor, identities: torch.Tensor, *,
                        far: float = 1e-3, min_false_accepts: int = DEFAULT_MIN_FALSE_ACCEPTS) -> float:
    """The reference encoder's threshold at ``far`` from all impostor pairs of a held-out labelled set.

    Accept when cos > threshold (see :mod:`privkit.isp.verification`).

    Raises:
        InsufficientDataError: the held-out set has too few impostor pairs to resolve ``far``
            (needs ``min_false_accepts / far`` pairs: 10,000 at FAR 1e-3).
    """
    far = check_probability("far", far)
    _check_images(images)
    z = embed_images(reference_encoder, images)
    pairs = VerificationPairs.create(identities, enrol_shots=1)
    return pair_threshold(pairs, z, far=far, min_false_accepts=min_false_accepts, argument="images")[0]




@dataclass(frozen=True, eq=False)
class InversionResult:
    """Success of an inversion attack under a reference encoder.

    Attributes:
        attack: name of the attack.
        success_rate: fraction of targets whose reconstruction verifies (cos > threshold).
        ci_low, ci_high: Wilson 95% interval.
        n_targets: number of targets.
        threshold: the reference threshold used.
        scores: (T,) reference cosines between reconstruction and target image.
    """

    attack: str
    success_rate: float
    ci_low: float
    ci_high: float
    n_targets: int
    threshold: float
    scores: torch.Tensor

    def as_row(self) -> dict:
        return {"attack": self.attack, "success_rate": self.success_rate, "ci_low": self.ci_low,
                "ci_high": self.ci_high, "n_targets": self.n_targets, "threshold": self.threshold,
                "mean_score": float(self.scores.double().mean())}


@torch.no_grad()
def inversion_success(reference_encoder: EncoderLike, reconstructions: torch.Tensor, target_images: torch.Tensor, *,
                      threshold: float, attack: str = "attack") -> InversionResult:
    """Does each reconstruction verify against its target image under the reference encoder (cos > threshold)?"""
    _check_images(reconstructions, "reconstructions")
    _check_images(target_images, "target_images")
    if reconstructions.shape[0] != target_images.shape[0]:
        raise ShapeError(f"reconstructions and target_images must have the same length, got {reconstructions.shape[0]} "
                         f"and {target_images.shape[0]}")
    if reconstructions.shape[0] == 0:
        raise InsufficientDataError("target_images: need at least 1 target, got 0")
    a = embed_images(reference_encoder, reconstructions.clamp(0, 1))
    b = embed_images(reference_encoder, target_images)
    scores = (a * b).sum(1).cpu()
    k, n = int((scores > threshold).sum()), scores.numel()
    lo, hi = wilson_interval(k, n)
    return InversionResult(attack, k / n, lo, hi, n, float(threshold), scores)


def inversion_audit(attacked_encoder: EncoderLike, aux_images: torch.Tensor, target_images: torch.Tensor,
                    reference_encoder: EncoderLike, reference_images: torch.Tensor, reference_identities: torch.Tensor,
                    *, attacks: Sequence[str] = ("regression", "optimisation"), far: float = 1e-3,
                    regression_options: dict | None = None, optimisation_options: dict | None = None,
                    seed: int = 0) -> pd.DataFrame:
    """Run both attack families against one encoder and report success rates under the reference encoder.

    A :class:`ConvDecoder` is trained on ``aux_images`` (the regression attack applies it directly); the optimisation
    attack searches that decoder's latent, starting from the target embedding, and needs a differentiable attacked
    encoder (a torch module; otherwise its row is NaN). The reference threshold is set at ``far`` on
    ``reference_images``/``reference_identities`` (held out; disjoint from aux and targets).

    Returns:
        DataFrame, one row per attack (columns of :meth:`InversionResult.as_row`).
    """
    for a in attacks:
        check_choice("attacks", a, ("regression", "optimisation"))
    tau = reference_threshold(reference_encoder, reference_images, reference_identities, far=far)
    z_t = embed_images(attacked_encoder, target_images)
    rows = []
    decoder, _ = train_regression_inverter(attacked_encoder, aux_images, seed=seed, **(regression_options or {}))
    if "regression" in attacks:
        with torch.no_grad():
            rec = decoder(z_t.to(target_images.device))
        rows.append(inversion_success(reference_encoder, rec, target_images, threshold=tau, attack="regression").as_row())
    if "optimisation" in attacks:
        if isinstance(attacked_encoder, torch.nn.Module):
            rec, _ = optimisation_attack(attacked_encoder, z_t, decoder=decoder, seed=seed,
                                         image_size=tuple(target_images.shape[-2:]), **(optimisation_options or {}))
            rows.append(inversion_success(reference_encoder, rec, target_images, threshold=tau, attack="optimisation").as_row())
        else:
            rows.append({"attack": "optimisation", "success_rate": math.nan, "ci_low": math.nan, "ci_high": math.nan,
                         "n_targets": int(target_images.shape[0]), "threshold": tau, "mean_score": math.nan})
    return pd.DataFrame(rows).assign(reference_far=far)


#: Columns :func:`describe_inversion_evidence` reads from an inversion table (``table7_inversion``).
_EVIDENCE_COLUMNS = ("encoder", "condition", "attack", "rank1", "rank1_low", "rank1_high", "rank1_chance", "margin",
                     "margin_low", "margin_high")


def describe_inversion_evidence(table: pd.DataFrame) -> str:
    """One sentence, generated from an inversion table, saying where the reconstructions show identity.

    A row (encoder, condition, attack) shows identity evidence when its rank-1 identification interval lies above
    chance or its margin-over-control interval lies above 0 (95 % intervals, not corrected for the several attacks
    and two measures per encoder, so a lone marginal hit is weak evidence). Every number in the sentence is read
    from ``table``, so the sentence cannot drift from the data it describes.

    Args:
        table: the inversion table (columns ``encoder, condition, attack, rank1, rank1_low, rank1_high,
            rank1_chance, margin, margin_low, margin_high``; with an optional ``judge`` column, each hit names the
            judge when there are several).

    Returns:
        The sentence.
    """
    if not isinstance(table, pd.DataFrame):
        raise InvalidArgumentError(f"table must be a pandas DataFrame, got {type(table).__name__}")
    missing = [c for c in _EVIDENCE_COLUMNS if c not in table.columns]
    if missing:
        raise InvalidArgumentError(f"table lacks the columns {missing} (an inversion table, table7_inversion)")
    if not len(table):
        raise InsufficientDataError("table: no inversion rows")
    judged = "judge" in table.columns and table["judge"].nunique() > 1
    with_evidence, without = [], []
    for (enc, cond), rows in table.groupby(["encoder", "condition"], sort=False):
        hits = []
        for r in rows.itertuples():
            attack = f"{r.attack} (judge {r.judge})" if judged else r.attack
            if r.rank1_low > r.rank1_chance:
                hits.append(f"{attack} rank-1 {r.rank1:.2f} [{r.rank1_low:.3f}, {r.rank1_high:.3f}] against "
                            f"chance {r.rank1_chance:.3f}")
            if r.margin_low > 0:
                hits.append(f"{attack} margin {r.margin:+.3f} [{r.margin_low:+.3f}, {r.margin_high:+.3f}]")
        name = f"{enc.split(' [')[0]} {cond}"
        (with_evidence if hits else without).append(f"{name} ({'; '.join(hits)})" if hits else name)
    n_attacks = table.groupby(["encoder", "condition"])["attack"].nunique().max()
    per = f"{n_attacks} attacks × {table['judge'].nunique()} judges × 2 measures" if judged else f"{n_attacks} attacks × 2 measures"
    text = (f"Identity evidence in the reconstructions (95 % intervals, up to {per} per "
            f"encoder and condition, uncorrected for multiple comparisons): ")
    text += ", ".join(with_evidence) if with_evidence else "none"
    text += "; none for " + ", ".join(without) + "." if without else "."
    return text
