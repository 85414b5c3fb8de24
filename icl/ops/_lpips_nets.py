"""LPIPS v0.1 networks in plain torch: the AlexNet and VGG16 trunks and the linear heads.

Parameters are a flat dict of tensors with canonical names: ``conv{i}.weight`` ``[O, I, k, k]``
and ``conv{i}.bias`` ``[O]`` for the i-th convolution of the trunk (torchvision's layout),
and ``lin{k}.weight`` ``[C_k]`` for the k-th linear head (a 1x1 convolution without bias).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:  # torch is imported where the networks run: the weights search needs none
    import torch

# The LPIPS scaling layer: (x - shift) / scale on inputs in [-1, 1].
SHIFT = (-0.030, -0.088, -0.188)
SCALE = (0.458, 0.448, 0.450)
EPS = 1e-10  # channel-norm epsilon of the official code: x / (||x|| + eps)

# A trunk as a list of steps: ("conv", out, in, kernel, stride, padding) is a convolution
# followed by ReLU, ("pool", kernel, stride) a max-pool without padding, "tap" records the
# current activation as one of the five LPIPS features.
Step = Union[str, tuple[Any, ...]]

# torchvision AlexNet.features; the taps are the ReLU outputs after conv1..conv5.
ALEX_STEPS: tuple[Step, ...] = (
    ("conv", 64, 3, 11, 4, 2), "tap", ("pool", 3, 2),
    ("conv", 192, 64, 5, 1, 2), "tap", ("pool", 3, 2),
    ("conv", 384, 192, 3, 1, 1), "tap",
    ("conv", 256, 384, 3, 1, 1), "tap",
    ("conv", 256, 256, 3, 1, 1), "tap",
)


def _vgg16_steps() -> tuple[Step, ...]:
    # torchvision VGG16 (configuration "D") up to relu5_3; taps relu1_2, relu2_2, relu3_3,
    # relu4_3, relu5_3 (the last ReLU of each block).
    steps: list[Step] = []
    cin = 3
    for block, (cout, convs) in enumerate(((64, 2), (128, 2), (256, 3), (512, 3), (512, 3))):
        if block:
            steps.append(("pool", 2, 2))
        for _ in range(convs):
            steps.append(("conv", cout, cin, 3, 1, 1))
            cin = cout
        steps.append("tap")
    return tuple(steps)


VGG_STEPS = _vgg16_steps()
STEPS = {"alex": ALEX_STEPS, "vgg": VGG_STEPS}
# smallest height/width whose every feature map is non-empty
MIN_SIZE = {"alex": 31, "vgg": 16}


def param_shapes(net: str) -> dict[str, tuple[int, ...]]:
    """Canonical parameter names and shapes of ``net`` ("alex" or "vgg")."""
    shapes: dict[str, tuple[int, ...]] = {}
    conv = tap = 0
    cur = 3
    for step in STEPS[net]:
        if isinstance(step, str):  # "tap"
            shapes[f"lin{tap}.weight"] = (cur,)
            tap += 1
        elif step[0] == "conv":
            _, cout, cin, k, _, _ = step
            shapes[f"conv{conv}.weight"] = (cout, cin, k, k)
            shapes[f"conv{conv}.bias"] = (cout,)
            conv += 1
            cur = cout
    return shapes


def features(x: torch.Tensor, params: dict[str, torch.Tensor], net: str) -> list[torch.Tensor]:
    """The five tapped ReLU activations of the trunk for scaled input ``x`` ``[N, 3, H, W]``."""
    import torch.nn.functional as F

    taps: list[torch.Tensor] = []
    conv = 0
    for step in STEPS[net]:
        if isinstance(step, str):  # "tap"
            taps.append(x)
        elif step[0] == "conv":
            _, _, _, _, stride, pad = step
            x = F.conv2d(x, params[f"conv{conv}.weight"], params[f"conv{conv}.bias"], stride=stride, padding=pad)
            x = F.relu(x)
            conv += 1
        else:
            x = F.max_pool2d(x, kernel_size=step[1], stride=step[2])
    return taps


def _unit(f: torch.Tensor) -> torch.Tensor:
    import torch

    return f / (torch.sqrt((f * f).sum(dim=1, keepdim=True)) + EPS)


def unit_taps(taps: list[torch.Tensor], acc: torch.dtype) -> list[torch.Tensor]:
    """The tapped features in the accumulation dtype, each channel vector scaled to unit norm."""
    return [_unit(f.to(acc)) for f in taps]


def head_distance(ux: list[torch.Tensor], uy: list[torch.Tensor], params: dict[str, torch.Tensor]) -> torch.Tensor:
    """LPIPS from unit features (:func:`unit_taps`) of ``x`` and ``y``: squared difference, 1x1
    linear head and spatial mean per layer, summed over the layers -> ``[N]``."""
    total = None
    for k, (fx, fy) in enumerate(zip(ux, uy)):
        d = (fx - fy).square()
        # 1x1 head then spatial mean == spatial mean then head (both linear)
        layer = d.mean(dim=(2, 3)) @ params[f"lin{k}.weight"].to(fx.dtype)
        total = layer if total is None else total + layer
    assert total is not None
    return total


def distance(x: torch.Tensor, y: torch.Tensor, params: dict[str, torch.Tensor], net: str) -> torch.Tensor:
    """LPIPS between scaled inputs ``x``, ``y`` ``[N, 3, H, W]`` -> float32 ``[N]``.

    The trunk runs in the dtype of ``x`` and ``params``; normalisation, heads and the spatial
    average run in float32 (half-precision channel norms would overflow), or float64 for a
    float64 trunk (then the result is float64).
    """
    import torch

    n = x.shape[0]
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    units = unit_taps(features(torch.cat([x, y]), params, net), acc)
    return head_distance([u[:n] for u in units], [u[n:] for u in units], params)
