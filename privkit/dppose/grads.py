"""Per-sample gradients, clipping and the noisy clipped sum of DP-SGD.

Two ways to get per-sample gradients:

``method="vmap"``
    :mod:`torch.func` (``functional_call`` + ``vmap`` + ``grad``), optionally
    chunked (``chunk_size``) to bound memory.  Works for any model without
    cross-sample interaction.

``method="hooks"``
    One forward pass with forward hooks on the layers that own trainable
    parameters (``nn.Linear``, ``nn.Conv2d`` with zero padding given as
    numbers, ``nn.GroupNorm``, ``nn.LayerNorm``) and one backward pass to the
    layer *outputs* only (no parameter gradients).  A layer's per-sample
    gradient is then a contraction of its input with its output gradient.

:func:`clipped_grad_sum` is the fast DP step: it computes every per-sample
norm with the cheaper of two exact formulas per layer -- materialising the
per-sample gradient (convolutions: one grouped weight-gradient convolution
with the batch folded into the groups) or the "ghost
norm" ``||sum_n g_n a_n^T||^2 = <A A^T, G G^T>`` (linear layers applied to
short sequences) -- and then forms ``sum_i c_i g_i`` (clip factors ``c_i``)
by one weighted contraction per layer, with no second backward pass.

A convolution whose input never changes during training (the first trainable
layer on cached frozen features) can skip the per-sample weight gradient
altogether: given the Gram matrix of each record's input patches
(:func:`patch_gram`, computed once per record), its per-sample norm is the
ghost norm ``<U^T U, G^T G>`` (a ``T x T`` product per record, ``T`` the output
positions) and its clipped sum one ordinary weight-gradient convolution of the
clip-scaled output gradients (``clipped_grad_sum(..., input_grams=...)``).

Every function here assumes the loss of a batch is the **mean of independent
per-sample losses** (no BatchNorm in train mode: its per-sample gradients are
not per record).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from .._validate import check_choice, check_int, check_positive
from ..errors import InvalidArgumentError, ShapeError

__all__ = ["CLIP_EPS", "PER_SAMPLE_METHODS", "ClippedSum", "trainable_parameters", "per_sample_grads",
           "per_sample_norms", "clip_factors", "clip_per_sample", "clipped_grad_sum", "patch_gram", "flatten_grads",
           "unflatten_grads", "check_per_record_model", "add_gaussian_noise"]

#: The clip factor is ``min(1, C / (||g|| + CLIP_EPS))`` (as in opacus and the public code).
CLIP_EPS = 1e-6

#: Valid values of ``method``.
PER_SAMPLE_METHODS: tuple[str, ...] = ("auto", "vmap", "hooks")

LossFn = Callable[..., torch.Tensor]
Batch = Sequence[torch.Tensor]


# -------------------------------------------------------------------------------------------- helpers
def trainable_parameters(model: nn.Module) -> dict[str, nn.Parameter]:
    """``{name: parameter}`` of the parameters with ``requires_grad`` (in ``named_parameters`` order)."""
    return {n: p for n, p in model.named_parameters() if p.requires_grad}


def check_per_record_model(model: nn.Module) -> None:
    """Raise if ``model`` holds a train-mode BatchNorm (its per-sample gradients are not per record)."""
    for name, m in model.named_modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training:
            raise InvalidArgumentError(
                f"model: module {name!r} is a BatchNorm in train mode; its per-sample gradients mix records, "
                "which breaks the DP-SGD sensitivity bound. Use GroupNorm, or freeze it (eval mode / frozen BN).")


def _check_batch(batch: Batch) -> tuple[torch.Tensor, tuple[torch.Tensor, ...], int]:
    if isinstance(batch, torch.Tensor) or not isinstance(batch, Sequence) or len(batch) < 1:
        raise InvalidArgumentError("batch must be a sequence (inputs, *targets) of tensors")
    if not all(isinstance(t, torch.Tensor) for t in batch):
        raise InvalidArgumentError("batch must contain only tensors")
    x, *targets = batch
    if x.ndim < 1:
        raise ShapeError("batch inputs must have a leading batch dimension")
    n = int(x.shape[0])
    for i, t in enumerate(targets):
        if t.ndim < 1 or t.shape[0] != n:
            raise ShapeError(f"batch[{i + 1}] has leading size {tuple(t.shape)[:1]}, expected {n} (the inputs')")
    return x, tuple(targets), n


def flatten_grads(grads: dict[str, torch.Tensor], *, batched: bool = False) -> torch.Tensor:
    """Concatenate a gradient dict into a vector ``(p,)`` (or ``(B, p)`` with ``batched=True``)."""
    if not grads:
        raise InvalidArgumentError("grads is empty")
    if batched:
        b = next(iter(grads.values())).shape[0]
        return torch.cat([g.reshape(b, -1) for g in grads.values()], dim=1)
    return torch.cat([g.reshape(-1) for g in grads.values()])


def unflatten_grads(flat: torch.Tensor, like: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Split a vector ``(p,)`` back into the shapes of ``like`` (a dict of parameters or gradients)."""
    out: dict[str, torch.Tensor] = {}
    i = 0
    for name, ref in like.items():
        k = ref.numel()
        out[name] = flat[i:i + k].view(ref.shape)
        i += k
    if i != flat.numel():
        raise ShapeError(f"flat has {flat.numel()} entries, the parameters need {i}")
    return out


# -------------------------------------------------------------------------------------------- clipping
def _sum_in_order(terms) -> torch.Tensor | None:
    """``terms[0] + terms[1] + ...``, added left to right (None when there is no term)."""
    total = None
    for t in terms:
        total = t if total is None else total + t
    return total


def _sq_norms(g: torch.Tensor) -> torch.Tensor:
    """(B,) squared L2 norms of the rows of ``g`` (B, ...)."""
    return torch.linalg.vector_norm(g.reshape(g.shape[0], -1), dim=1).square()


def per_sample_norms(grads: dict[str, torch.Tensor]) -> torch.Tensor:
    """(B,) L2 norms of per-sample gradients, taken jointly over all parameters."""
    if not grads:
        raise InvalidArgumentError("grads is empty")
    return _sum_in_order(_sq_norms(g) for g in grads.values()).sqrt()


def clip_factors(norms: torch.Tensor, clip: float) -> torch.Tensor:
    """``min(1, C / (||g_i|| + 1e-6))`` per sample."""
    c = check_positive("clip", clip)
    return (c / (norms + CLIP_EPS)).clamp(max=1.0)


def clip_per_sample(grads: dict[str, torch.Tensor], clip: float) -> dict[str, torch.Tensor]:
    """Clip every per-sample gradient to norm ``<= clip`` (norm over all parameters jointly).

    Args:
        grads: ``{name: (B, *param.shape)}`` per-sample gradients.
        clip: Clipping norm ``C > 0``.

    Returns:
        The clipped per-sample gradients ``g_i * min(1, C / (||g_i|| + 1e-6))``.
    """
    c = check_positive("clip", clip)
    f = clip_factors(per_sample_norms(grads), c)
    return {n: g * f.view(-1, *([1] * (g.ndim - 1))).to(g.dtype) for n, g in grads.items()}


# -------------------------------------------------------------------------------------------- vmap
def _vmap_grads(model: nn.Module, loss_fn: LossFn, x: torch.Tensor, targets: tuple[torch.Tensor, ...],
                chunk_size: int | None) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Per-sample gradients and per-sample losses by torch.func."""
    from torch.func import functional_call, grad, vmap

    params = {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}
    frozen = {n: p.detach() for n, p in model.named_parameters() if not p.requires_grad}
    buffers = dict(model.named_buffers())

    def sample_loss(prm, xi, *ti):
        out = functional_call(model, (prm, frozen, buffers), (xi.unsqueeze(0),))
        loss = loss_fn(out, *(t.unsqueeze(0) for t in ti))
        return loss, loss.detach()

    fn = vmap(grad(sample_loss, has_aux=True), in_dims=(None, 0, *([0] * len(targets))), chunk_size=chunk_size)
    return fn(params, x, *targets)


# -------------------------------------------------------------------------------------------- hooks
def _conv_supported(m: nn.Conv2d) -> bool:
    return m.padding_mode == "zeros" and not isinstance(m.padding, str)


def _is_pointwise(m: nn.Conv2d) -> bool:
    return (tuple(m.kernel_size) == (1, 1) and tuple(m.stride) == (1, 1) and tuple(m.padding) == (0, 0)
            and m.groups == 1)


def _supported(m: nn.Module) -> bool:
    # Exact types only: a subclass may change what ``forward`` does with its input (timm's ``Conv2dSame`` pads
    # it first), and the hooks would then compute the per-sample gradient of a different layer.
    if type(m) is nn.Conv2d:
        return _conv_supported(m)
    return type(m) in (nn.Linear, nn.GroupNorm, nn.LayerNorm)


def _layer_plan(model: nn.Module) -> list[tuple[nn.Module, dict[str, str]]] | None:
    """``[(module, {attr: parameter name})]`` covering every trainable parameter, or None if impossible."""
    names = {id(p): n for n, p in model.named_parameters() if p.requires_grad}
    plan: list[tuple[nn.Module, dict[str, str]]] = []
    seen: set[int] = set()
    for m in model.modules():
        own = {a: p for a, p in m.named_parameters(recurse=False) if p.requires_grad}
        if not own:
            continue
        if not _supported(m):
            return None
        entry = {}
        for a, p in own.items():
            if id(p) in seen:  # a parameter shared between modules
                return None
            seen.add(id(p))
            entry[a] = names[id(p)]
        plan.append((m, entry))
    return plan if seen == set(names) else None


def _gram_layer_ok(m: nn.Module) -> bool:
    return type(m) is nn.Conv2d and _conv_supported(m) and m.groups == 1


def patch_gram(layer: nn.Conv2d, inputs: torch.Tensor) -> torch.Tensor:
    """Per-record Gram matrices of ``layer``'s input patches: ``U_b^T U_b`` with ``U_b = unfold(inputs[b])``.

    ``U_b`` is the (C k_h k_w, T) matrix of record ``b``'s receptive fields (``T`` output positions, the layer's
    padding, stride and dilation), so entry ``(p, q)`` is the inner product of the patches at output positions
    ``p`` and ``q``.  With it the squared norm of the record's weight gradient ``sum_p g_p u_p^T`` is
    ``sum_{p,q} (U^T U)_{pq} <g_p, g_q>`` without forming the gradient (see :func:`clipped_grad_sum`).

    Args:
        layer: a plain ``nn.Conv2d`` with ``groups = 1`` and numeric zero padding.
        inputs: (B, C, H, W) what the layer receives.

    Returns:
        (B, T, T) symmetric Gram matrices in the dtype of ``inputs`` (symmetric by construction: the lower
        triangle is copied from the upper one).

    Raises:
        InvalidArgumentError: another kind of layer.
        ShapeError: inputs that are not (B, C, H, W) with the layer's ``in_channels``.
    """
    if not _gram_layer_ok(layer):
        raise InvalidArgumentError(
            f"layer must be a plain nn.Conv2d with groups=1 and numeric zero padding, got {type(layer).__name__}")
    if not isinstance(inputs, torch.Tensor) or inputs.ndim != 4 or inputs.shape[1] != layer.in_channels:
        shape = tuple(inputs.shape) if isinstance(inputs, torch.Tensor) else type(inputs).__name__
        raise ShapeError(f"inputs must have shape (B, {layer.in_channels}, H, W), got {shape}")
    u = F.unfold(inputs, layer.kernel_size, dilation=layer.dilation, padding=layer.padding, stride=layer.stride)
    gram = torch.bmm(u.transpose(1, 2), u)
    upper = torch.triu(gram)
    return upper + torch.triu(gram, diagonal=1).transpose(1, 2)


#: How many records of a batch :func:`clipped_grad_sum` checks against their ``input_grams`` (traces).
_GRAM_CHECKS = 16


def _check_gram(m: nn.Conv2d, a: torch.Tensor, gram: torch.Tensor, t: int) -> None:
    """Refuse Gram matrices that are not those of this input (wrong rows, another layer, stale features).

    Exactness is by construction (the caller indexes the records' cached Grams with the same rows as their
    features); this check catches a mix-up at a small cost: the traces of up to ``_GRAM_CHECKS`` records, spread
    over the batch, must equal the squared norms of their patches (computed directly), and the first record's
    Gram is recomputed in full.
    """
    b = a.shape[0]
    if not isinstance(gram, torch.Tensor) or tuple(gram.shape) != (b, t, t):
        shape = tuple(gram.shape) if isinstance(gram, torch.Tensor) else type(gram).__name__
        raise ShapeError(f"input_grams for {type(m).__name__}({m.in_channels}, {m.out_channels}) must have shape "
                         f"({b}, {t}, {t}) (records, output positions, output positions), got {shape}")
    rows = torch.linspace(0, b - 1, min(b, _GRAM_CHECKS), device=a.device).round().long().unique()
    sub = a[rows]
    ones = a.new_ones((1, 1, *m.kernel_size))
    expect = F.conv2d(sub.square().sum(1, keepdim=True), ones, stride=m.stride, padding=m.padding,
                      dilation=m.dilation).sum((1, 2, 3))
    trace = torch.diagonal(gram[rows], dim1=1, dim2=2).sum(1).to(expect.dtype)
    tol = 1e-4 * expect.abs() + 1e-6 * float(expect.abs().max()) + 1e-12
    finite = torch.isfinite(expect)  # a non-finite record is zeroed by the caller; its Gram must be non-finite too
    bad = (finite & ~((trace - expect).abs() <= tol)) | (finite != torch.isfinite(trace))
    first = patch_gram(m, a[:1])[0].to(gram.dtype)
    scale = float(first.abs().max()) + 1e-12
    if bool(bad.any()) or not bool(((gram[0] - first).abs() <= 1e-4 * scale).all()):
        raise InvalidArgumentError(
            f"input_grams for {type(m).__name__}({m.in_channels}, {m.out_channels}) do not match the layer's input "
            f"({int(bad.sum())} of the {rows.numel()} records checked differ): pass patch_gram(layer, x) of the "
            "same records, row for row, computed from the same features")


class _Tape:
    """Forward hooks that record each planned layer's input and output."""

    def __init__(self, plan: list[tuple[nn.Module, dict[str, str]]]):
        self.plan = plan
        self.calls: dict[int, list[tuple[torch.Tensor, torch.Tensor, int]]] = {id(m): [] for m, _ in plan}
        self.handles = []

    def __enter__(self) -> "_Tape":
        for m, _ in self.plan:
            self.handles.append(m.register_forward_hook(self._hook))
        return self

    def _hook(self, module, inputs, output):
        if not isinstance(output, torch.Tensor):
            raise InvalidArgumentError(f"{type(module).__name__} returned a non-tensor output; use method='vmap'")
        self.calls[id(module)].append((inputs[0].detach(), output, output._version))

    def __exit__(self, *exc) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()


def _ghost_cheaper(n: int, i: int, o: int) -> bool:
    """Ghost norm (cost ~ n^2 (i + o)) beats materialising (cost ~ n i o)."""
    return n * (i + o) < i * o


class _LayerGrads:
    """Per-sample quantities of one layer: per-sample grads or ghost factors, and their norms."""

    def __init__(self, module: nn.Module, attrs: dict[str, str],
                 calls: list[tuple[torch.Tensor, torch.Tensor | None]], *, materialize: bool,
                 gram: torch.Tensor | None = None):
        self.module = module
        self.attrs = attrs
        self.ps: dict[str, torch.Tensor] = {}  # attr -> (B, *shape) materialised per-sample grads
        self.ghost: tuple[torch.Tensor, torch.Tensor] | None = None  # (A (B,N,I), G (B,N,O)) for weight
        self.conv_ghost: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None  # (input, out grad, Gram)
        m = module
        if isinstance(m, nn.Linear):
            self._linear(calls, materialize)
        elif isinstance(m, nn.Conv2d):
            self._conv(calls, gram)
        elif isinstance(m, nn.GroupNorm):
            self._norm(calls, lambda a: F.group_norm(a, m.num_groups, eps=m.eps), channel_dim=True)
        else:  # LayerNorm
            self._norm(calls, lambda a: F.layer_norm(a, m.normalized_shape, eps=m.eps), channel_dim=False)

    def _add(self, attr: str, g: torch.Tensor) -> None:
        if attr not in self.attrs:
            return
        self.ps[attr] = self.ps[attr] + g if attr in self.ps else g

    def _linear(self, calls, materialize: bool) -> None:
        m = self.module
        for a, g in calls:
            b = a.shape[0]
            a3 = a.reshape(b, -1, a.shape[-1])
            g3 = g.reshape(b, -1, g.shape[-1])
            if "weight" in self.attrs:
                if (not materialize and len(calls) == 1
                        and _ghost_cheaper(a3.shape[1], a3.shape[2], g3.shape[2])):
                    self.ghost = (a3, g3)
                else:
                    self._add("weight", torch.einsum("bno,bni->boi", g3, a3))
            if m.bias is not None:
                self._add("bias", g3.sum(1))

    def _conv(self, calls, gram: torch.Tensor | None) -> None:
        m = self.module
        if gram is not None and "weight" in self.attrs:
            if len(calls) != 1:
                raise InvalidArgumentError(f"input_grams: the layer {type(m).__name__}({m.in_channels}, "
                                           f"{m.out_channels}) is called {len(calls)} times per forward, expected once")
            a, g = calls[0]
            _check_gram(m, a, gram, g.shape[-2] * g.shape[-1])
            self.conv_ghost = (a, g, gram)
            if m.bias is not None:
                self._add("bias", g.reshape(a.shape[0], g.shape[1], -1).sum(2))
            return
        for a, g in calls:
            b = a.shape[0]
            if "weight" in self.attrs and _is_pointwise(m):  # 1x1 conv: a batched matmul
                gw = torch.bmm(g.reshape(b, g.shape[1], -1), a.reshape(b, a.shape[1], -1).transpose(1, 2))
                self._add("weight", gw.view(b, *m.weight.shape))
            elif "weight" in self.attrs:
                # Per-sample weight gradients as ONE grouped weight-gradient convolution: the batch is folded
                # into the channels (1, B*C, H, W) and the groups become B * groups, so each sample's output
                # gradient only meets its own input.  Much faster on CPU than unfold + bmm.
                w_shape = (b * m.out_channels, m.in_channels // m.groups, *m.kernel_size)
                gw = torch.ops.aten.convolution_backward(
                    g.reshape(1, b * g.shape[1], *g.shape[2:]), a.reshape(1, b * a.shape[1], *a.shape[2:]),
                    a.new_empty(w_shape), None, m.stride, m.padding, m.dilation, False, (0, 0), b * m.groups,
                    (False, True, False))[1]
                self._add("weight", gw.view(b, *m.weight.shape))
            if m.bias is not None:
                self._add("bias", g.reshape(b, g.shape[1], -1).sum(2))

    def _norm(self, calls, normalise, *, channel_dim: bool) -> None:
        m = self.module
        for a, g in calls:
            b = a.shape[0]
            if channel_dim:  # GroupNorm: (B, C, *) -> per channel
                def per_sample(t: torch.Tensor) -> torch.Tensor:
                    return t.reshape(b, g.shape[1], -1).sum(2)
            else:  # LayerNorm: (B, *, *normalized_shape) -> per element of normalized_shape
                def per_sample(t: torch.Tensor) -> torch.Tensor:
                    return t.reshape(b, -1, *m.normalized_shape).sum(1)
            if "weight" in self.attrs:  # d loss / d gamma = sum of x_hat * grad_out (x_hat recomputed)
                self._add("weight", per_sample(normalise(a) * g))
            if "bias" in self.attrs:
                self._add("bias", per_sample(g))

    def sq_norms(self) -> torch.Tensor:
        terms = [_sq_norms(g) for g in self.ps.values()]
        if self.ghost is not None:
            a, g = self.ghost
            terms.append((torch.bmm(a, a.transpose(1, 2)) * torch.bmm(g, g.transpose(1, 2))).sum((1, 2)))
        if self.conv_ghost is not None:  # ||sum_p g_p u_p^T||^2 = sum_pq (U^T U)_pq <g_p, g_q>
            _, g, gram = self.conv_ghost
            gt = g.reshape(g.shape[0], g.shape[1], -1).transpose(1, 2)  # (B, T, O)
            terms.append((torch.bmm(gram.to(gt.dtype), gt) * gt).sum((1, 2)))
        return _sum_in_order(terms)

    def weighted_sums(self, c: torch.Tensor) -> dict[str, torch.Tensor]:
        out = {}
        for attr, g in self.ps.items():
            out[self.attrs[attr]] = torch.einsum("b,bk->k", c.to(g.dtype), g.reshape(g.shape[0], -1)).view(
                g.shape[1:])
        if self.ghost is not None:
            a, g = self.ghost
            gc = g * c.to(g.dtype).view(-1, 1, 1)
            out[self.attrs["weight"]] = gc.reshape(-1, gc.shape[-1]).t() @ a.reshape(-1, a.shape[-1])
        if self.conv_ghost is not None:  # one ordinary weight-gradient convolution of the clip-scaled gradients
            a, g, _ = self.conv_ghost
            m = self.module
            gc = g * c.to(g.dtype).view(-1, *([1] * (g.ndim - 1)))
            out[self.attrs["weight"]] = torch.ops.aten.convolution_backward(
                gc, a, m.weight.detach(), None, m.stride, m.padding, m.dilation, False, (0, 0), m.groups,
                (False, True, False))[1]
        return out


def _hooks_layers(model: nn.Module, loss_fn: LossFn, x: torch.Tensor, targets: tuple[torch.Tensor, ...],
                  plan, *, materialize: bool,
                  grams: dict[int, torch.Tensor] | None = None) -> tuple[list[_LayerGrads], torch.Tensor]:
    b = x.shape[0]
    with _Tape(plan) as tape:
        out = model(x)
        loss = loss_fn(out, *targets)
    records = [(m, attrs, tape.calls.pop(id(m))) for m, attrs in plan]
    outputs = []
    for m, _, calls in records:
        for _, o, version in calls:
            if o._version != version:
                raise InvalidArgumentError(
                    f"the output of {type(m).__name__} was modified in place (e.g. ReLU(inplace=True)); "
                    "per-sample gradients by hooks need out-of-place operations (or use method='vmap')")
            outputs.append(o)
    gouts = list(torch.autograd.grad(loss * b, outputs, allow_unused=True))
    shapes = [o.shape for o in outputs]
    del outputs, out  # the layer outputs are no longer needed: free them before the per-layer work
    layers: list[_LayerGrads] = []
    k = 0
    for i, (m, attrs, calls) in enumerate(records):
        pairs = []
        for a, _, _ in calls:
            go = gouts[k]
            gouts[k] = None
            pairs.append((a, a.new_zeros(shapes[k]) if go is None else go.detach()))
            k += 1
        records[i] = None  # drop this layer's recorded inputs as soon as they are used
        if not pairs:  # layer not used in this forward: zero per-sample gradients
            layers.append(_ZeroLayer(m, attrs, b, x))
            continue
        layers.append(_LayerGrads(m, attrs, pairs, materialize=materialize,
                                  gram=None if grams is None else grams.get(id(m))))
        del pairs
    return layers, loss.detach()


class _ZeroLayer(_LayerGrads):
    def __init__(self, module: nn.Module, attrs: dict[str, str], b: int, x: torch.Tensor):  # noqa: D107
        self.module = module
        self.attrs = attrs
        self.ghost = None
        self.ps = {a: torch.zeros((b, *getattr(module, a).shape), dtype=getattr(module, a).dtype,
                                  device=getattr(module, a).device) for a in attrs}


# -------------------------------------------------------------------------------------------- public API
def _resolve_method(model: nn.Module, method: str) -> tuple[str, list | None]:
    check_choice("method", method, PER_SAMPLE_METHODS)
    if method == "vmap":
        return "vmap", None
    plan = _layer_plan(model)
    if plan is None:
        if method == "hooks":
            raise InvalidArgumentError("method='hooks' supports only models whose trainable parameters all belong to "
                                       "nn.Linear, nn.Conv2d (numeric zero padding), nn.GroupNorm or nn.LayerNorm; "
                                       "use method='vmap'")
        return "vmap", None
    return "hooks", plan


def per_sample_grads(model: nn.Module, loss_fn: LossFn, batch: Batch, *, chunk_size: int | None = None,
                     method: Literal["auto", "vmap", "hooks"] = "vmap") -> dict[str, torch.Tensor]:
    """Per-sample gradients of the trainable parameters.

    Args:
        model: The network; it must treat samples independently.
        loss_fn: ``loss_fn(model(inputs), *targets)`` -> the **mean** loss over
            the batch (on a batch of one it is that sample's loss).
        batch: ``(inputs, *targets)``, each with leading size ``B``.
        chunk_size: ``vmap`` only: process at most this many samples at once
            (bounds memory; ``None`` = all at once).
        method: ``"vmap"`` (torch.func, default), ``"hooks"`` (one forward and
            one backward pass, see the module docstring) or ``"auto"`` (hooks
            when the model's layers allow it).

    Returns:
        ``{name: (B, *param.shape)}`` for every trainable parameter, in
        ``named_parameters`` order, dtype and device of the parameters.
    """
    check_per_record_model(model)
    x, targets, b = _check_batch(batch)
    if chunk_size is not None:
        chunk_size = check_int("chunk_size", chunk_size, minimum=1)
    params = trainable_parameters(model)
    if not params:
        raise InvalidArgumentError("model has no trainable parameters")
    if b == 0:
        return {n: p.new_zeros((0, *p.shape)) for n, p in params.items()}
    how, plan = _resolve_method(model, method)
    if how == "vmap":
        return _vmap_grads(model, loss_fn, x, targets, chunk_size)[0]
    layers, _ = _hooks_layers(model, loss_fn, x, targets, plan, materialize=True)
    flat = {layer.attrs[attr]: g for layer in layers for attr, g in layer.ps.items()}
    return {n: flat[n] for n in params}


def _check_input_grams(model: nn.Module, input_grams: Mapping[nn.Module, torch.Tensor] | None, method: str,
                       b: int) -> dict[int, torch.Tensor] | None:
    if input_grams is None:
        return None
    if not isinstance(input_grams, Mapping):
        raise InvalidArgumentError(f"input_grams must be a mapping {{conv layer: (B, T, T) Grams}}, "
                                   f"got {type(input_grams).__name__}")
    if method == "vmap":
        raise InvalidArgumentError("input_grams is used by method='hooks' (or 'auto'), not method='vmap'")
    held = {id(m) for m in model.modules()}
    out: dict[int, torch.Tensor] = {}
    for m, gram in input_grams.items():
        if id(m) not in held:
            raise InvalidArgumentError(f"input_grams names a {type(m).__name__} that is not a layer of model")
        if not _gram_layer_ok(m) or not m.weight.requires_grad:
            raise InvalidArgumentError(
                f"input_grams: {type(m).__name__} must be a plain nn.Conv2d (groups=1, numeric zero padding) "
                "with a trainable weight")
        if not isinstance(gram, torch.Tensor) or gram.ndim != 3 or gram.shape[0] != b or gram.shape[1] != gram.shape[2]:
            shape = tuple(gram.shape) if isinstance(gram, torch.Tensor) else type(gram).__name__
            raise ShapeError(f"input_grams for {type(m).__name__}({m.in_channels}, {m.out_channels}) must have shape "
                             f"({b}, T, T) (one Gram per record of the batch), got {shape}")
        out[id(m)] = gram
    return out


@dataclass(frozen=True)
class ClippedSum:
    """Result of :func:`clipped_grad_sum`.

    Attributes:
        grads: ``{name: param-shaped tensor}``, ``sum_i clip_C(g_i)``.
        norms: (B,) unclipped per-sample gradient norms (NaN or inf for a record whose gradient was not finite).
        loss: Mean loss of the batch's finite records (detached scalar; 0 for an empty batch).
        batch_size: ``B``.
        non_finite: Records whose per-sample gradient was not finite; they contribute **zero** to the sum (a
            vector of norm 0 <= C, so the sensitivity bound holds). A diagnostic computed on private data, not
            covered by any guarantee.
    """

    grads: dict[str, torch.Tensor]
    norms: torch.Tensor
    loss: torch.Tensor
    batch_size: int
    non_finite: int = 0

    def flat(self) -> torch.Tensor:
        """The sum as one vector ``(p,)``."""
        return flatten_grads(self.grads)

    @staticmethod
    def combine(parts: Sequence["ClippedSum"]) -> "ClippedSum":
        """The clipped sum of a batch from those of its parts (disjoint records, in order): the sums added, the
        norms concatenated, the loss the mean over all finite records."""
        if not parts:
            raise InvalidArgumentError("parts must hold at least one ClippedSum")
        grads = {n: torch.stack([p.grads[n] for p in parts]).sum(0) for n in parts[0].grads}
        finite = [p.batch_size - p.non_finite for p in parts]
        n_finite = sum(finite)
        loss = (sum(p.loss * f for p, f in zip(parts, finite)) / n_finite if n_finite
                else torch.zeros_like(parts[0].loss))
        return ClippedSum(grads=grads, norms=torch.cat([p.norms for p in parts]), loss=loss,
                          batch_size=sum(p.batch_size for p in parts), non_finite=sum(p.non_finite for p in parts))


def clipped_grad_sum(model: nn.Module, loss_fn: LossFn, batch: Batch, *, clip: float,
                     method: Literal["auto", "vmap", "hooks"] = "auto", chunk_size: int | None = None,
                     input_grams: Mapping[nn.Module, torch.Tensor] | None = None) -> ClippedSum:
    """``sum_i clip_C(grad loss(w, z_i))``: ONE clip per record, norm over all trainable parameters jointly.

    With ``method="hooks"`` (chosen by ``"auto"`` when the layers allow it) the
    per-sample norms come from per-layer formulas and the clipped sum from one
    weighted contraction per layer, in one forward and one backward pass; with
    ``"vmap"`` the per-sample gradients are materialised with torch.func and
    summed with their clip factors.  Both compute the same quantity.

    Args:
        model: The network (samples treated independently).
        loss_fn: ``loss_fn(output, *targets)`` -> mean loss over the batch.
        batch: ``(inputs, *targets)``.
        clip: Clipping norm ``C > 0``.
        method: ``"auto"``, ``"hooks"`` or ``"vmap"``.
        chunk_size: ``vmap`` chunking.
        input_grams: ``{conv layer: (B, T, T)}``, the :func:`patch_gram` of what each named layer receives for
            these records, row for row (hooks only).  For a layer whose input is fixed data (the first trainable
            layer on cached frozen features), the Grams are computed once per record and reused at every step:
            the layer's per-sample norms then cost a ``T x T`` product per record instead of the per-sample
            weight gradient, and its clipped sum one ordinary weight-gradient convolution.  Same result (up to
            rounding); Grams that do not match the input are refused.

    Returns:
        A :class:`ClippedSum`.

    Raises:
        InvalidArgumentError: bad ``clip``, a model with no trainable parameters or a train-mode BatchNorm,
            ``input_grams`` with ``method="vmap"``, for a layer the model does not hold or that is not a plain
            ``nn.Conv2d`` (groups 1, numeric zero padding) owning a trainable weight, or not matching the inputs.
        ShapeError: a batch whose tensors disagree in size, Grams of the wrong shape.
    """
    c = check_positive("clip", clip)
    check_per_record_model(model)
    x, targets, b = _check_batch(batch)
    params = trainable_parameters(model)
    if not params:
        raise InvalidArgumentError("model has no trainable parameters")
    grams = _check_input_grams(model, input_grams, method, b)
    if b == 0:
        dev = next(iter(params.values())).device
        return ClippedSum(grads={n: torch.zeros_like(p) for n, p in params.items()},
                          norms=torch.zeros(0, device=dev), loss=torch.zeros((), device=dev), batch_size=0)
    how, plan = _resolve_method(model, method)
    if how == "vmap":  # "auto" fell back to vmap: the Grams, an optimisation of the hooks path, are not needed
        if chunk_size is not None:
            chunk_size = check_int("chunk_size", chunk_size, minimum=1)
        ps, losses = _vmap_grads(model, loss_fn, x, targets, chunk_size)
        norms = per_sample_norms(ps)
        ok = torch.isfinite(norms)
        f = torch.where(ok, clip_factors(norms, c), torch.zeros_like(norms))
        # A non-finite per-sample gradient never reaches the sum: its rows are replaced by zeros (0 * NaN = NaN,
        # so a zero clip factor alone would not do).
        sums = {n: torch.einsum("b,bk->k", f.to(g.dtype), torch.where(ok[:, None], g.reshape(b, -1), 0.0))
                .view(g.shape[1:]) for n, g in ps.items()}
        loss = losses[ok].mean() if bool(ok.any()) else torch.zeros((), device=losses.device)
        return ClippedSum(grads={n: sums[n].detach() for n in params}, norms=norms.detach(), loss=loss.detach(),
                          batch_size=b, non_finite=int((~ok).sum()))
    layers, loss = _hooks_layers(model, loss_fn, x, targets, plan, materialize=False, grams=grams)
    norms = _sum_in_order(layer.sq_norms() for layer in layers).clamp_min(0).sqrt()
    ok = torch.isfinite(norms)
    if not bool(ok.all()):
        # The per-layer contractions sum over the batch, so one non-finite record would poison them: recompute the
        # sum over the finite records only (records are independent, see check_per_record_model); the others
        # contribute zero.
        keep = ok.nonzero().squeeze(1)
        grams_kept = None if input_grams is None else {m: gram[keep] for m, gram in input_grams.items()}
        sub = clipped_grad_sum(model, loss_fn, (x[keep], *(t[keep] for t in targets)), clip=c, method="hooks",
                               input_grams=grams_kept)
        return ClippedSum(grads=sub.grads, norms=norms.detach(), loss=sub.loss, batch_size=b,
                          non_finite=int((~ok).sum()))
    f = clip_factors(norms, c)
    sums = {name: g for layer in layers for name, g in layer.weighted_sums(f).items()}
    return ClippedSum(grads={n: sums[n] for n in params}, norms=norms, loss=loss, batch_size=b)


def add_gaussian_noise(total: torch.Tensor, *, clip: float, noise_multiplier: float,
                       generator: torch.Generator | None = None) -> torch.Tensor:
    """``total + N(0, (noise_multiplier * clip)^2 I)``: the Gaussian mechanism of DP-SGD.

    Args:
        total: Clipped gradient sum, ``(p,)`` (or ``(n, p)`` for ``n`` independent
            draws, as an auditor needs).
        clip: Clipping norm ``C > 0`` (the add/remove sensitivity of the sum).
        noise_multiplier: ``sigma > 0``.
        generator: Source of the noise (on ``total``'s device).

    Returns:
        The noisy sum (dtype and device of ``total``; noise drawn in float64,
        see :func:`privkit.privacy.samplers.sample_gaussian`).

    Raises:
        InvalidArgumentError: a non-finite ``total``, or bad ``clip``/``noise_multiplier``.
    """
    c = check_positive("clip", clip)
    s = check_positive("noise_multiplier", noise_multiplier)
    if not isinstance(total, torch.Tensor) or not total.is_floating_point():
        raise InvalidArgumentError("total must be a floating-point torch.Tensor (the clipped gradient sum)")
    if total.numel() and not bool(torch.isfinite(total).all()):
        raise InvalidArgumentError(
            "total (the clipped gradient sum) contains NaN or inf values; the Gaussian mechanism needs a finite sum "
            "of norm-bounded gradients (a non-finite record must never reach the sum)")
    from ..privacy.samplers import sample_gaussian

    noise = sample_gaussian(tuple(total.shape), sigma=s * c, generator=generator, device=total.device,
                            dtype=total.dtype)
    return total + noise
