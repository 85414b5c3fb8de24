"""Every image kernel is a torch.library op: torch.compile(fullgraph=True) traces a function
that calls them (no graph break), and the compiled results equal the eager ones.

The compile uses backend="aot_eager": it runs dynamo, the fake (meta) implementations and
AOTAutograd (forward and backward graphs), everything fullgraph=True checks, without the
inductor C++ compile that takes ~20 s per graph on this 2-core machine.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import icl.ops as ops
from icl.ops import _lpips_weights as lw


def _inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    img = torch.randint(0, 256, (2, 16, 16, 3), dtype=torch.uint8, generator=g)
    return {
        "img": img,
        "a": torch.rand(2, 16, 16, 3, dtype=torch.float64, generator=g),
        "b": torch.rand(2, 16, 16, 3, dtype=torch.float64, generator=g),
        "palette": torch.tensor([[0, 0, 0], [255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 255]], dtype=torch.uint8),
        "depth": torch.rand(2, 8, 8, dtype=torch.float64, generator=g) * 10,
        "boxes": torch.tensor([[0.0, 0, 4, 4], [1, 1, 5, 6], [2, 0, 3, 9]]),
        "mask": torch.rand(2, 16, 16, generator=g) > 0.6,
    }


def _pipeline(x: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    s = ops.ssim(x["a"], x["b"], 1.0)
    p = ops.psnr(x["a"], x["b"], 1.0)
    labels = ops.nearest_palette(x["img"], x["palette"])
    bins = ops.turbo_bins(x["img"])
    depth = ops.turbo_decode(x["img"], 0.5, 10.0)
    colour = ops.turbo_encode(x["depth"], 0.5, 10.0)
    red, red_mask = ops.redness(x["img"], 0.25)
    iou = ops.box_iou(x["boxes"], x["boxes"])
    comp = ops.connected_components(x["mask"], 8, x["a"][..., 0])
    return (s * 2, p + 1, labels + 1, bins, depth * 2, colour, red, red_mask, iou, comp.labels, comp.num,
            comp.area.sum(), comp.value_sum.sum())


def test_fullgraph_compile_matches_eager() -> None:
    torch._dynamo.reset()
    x = _inputs()
    compiled = torch.compile(_pipeline, fullgraph=True, backend="aot_eager")
    for got, want in zip(compiled(x), _pipeline(x), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_fullgraph_compile_backward_through_ssim_and_psnr() -> None:
    torch._dynamo.reset()
    x = _inputs()

    def loss(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (1 - ops.ssim(a, b, 1.0)).sum() - ops.psnr(a, b, 1.0).sum() / 100

    grads = []
    for fn in (loss, torch.compile(loss, fullgraph=True, backend="aot_eager")):
        a = x["a"].clone().requires_grad_()
        fn(a, x["b"]).backward()
        grads.append(a.grad)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-12, atol=1e-12)


def test_fullgraph_compile_lpips() -> None:
    try:
        lw.find("alex")
    except lw.LPIPSWeightsNotFound as exc:
        pytest.skip(f"LPIPS alex weights not installed (run `make lpips-weights`): {exc}")
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(1)
    a, b = torch.rand(2, 32, 32, 3, generator=g), torch.rand(2, 32, 32, 3, generator=g)
    compiled = torch.compile(lambda u, v: ops.lpips(u, v) * 1, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(a, b), ops.lpips(a, b))


def test_data_checks_still_run_in_compiled_code() -> None:
    # finiteness needs the data: the op checks it at run time, not the trace
    torch._dynamo.reset()
    a = torch.rand(1, 16, 16, 1, dtype=torch.float64)
    bad = a.clone()
    bad[0, 3, 3, 0] = np.nan
    compiled = torch.compile(lambda u, v: ops.ssim(u, v, 1.0), fullgraph=True, backend="aot_eager")
    with pytest.raises(ValueError, match="b: contains NaN"):
        compiled(a, bad)


def test_fullgraph_compile_host_ops() -> None:
    # sequential host kernels with data-dependent output sizes (dynamic sizes in the fakes)
    torch._dynamo.reset()
    boxes = torch.tensor([[0.0, 0, 4, 4], [1, 1, 5, 6], [2, 0, 3, 9]])
    scores = torch.tensor([0.9, 0.5, 0.7])
    ids = torch.tensor([0, 0, 1])
    offsets = torch.tensor([0, 2, 3])
    thresholds = [0.1, 0.5]  # a tensor of thresholds is read with .tolist(): a graph break

    def host_ops(b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        pi, gi = ops.match_points(b[:, :2], b[:, 2:], 3.0)
        mp, mg, miou = ops.greedy_match(ops.box_iou(b, b), 0.1)
        tp, tp_sum, best = ops.greedy_match_counts(b, offsets, b, offsets, thresholds)
        matches = ops.detection_matches(b, scores, ids, b, ids)
        return pi, gi, mp, mg, miou, tp, tp_sum, best, matches.gt_index, matches.order

    compiled = torch.compile(host_ops, fullgraph=True, backend="aot_eager")
    for got, want in zip(compiled(boxes), host_ops(boxes), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
