"""This checkout's native kernels beside another build of icl._C in one process (interleaved,
median of many rounds): nearest_palette, turbo_decode and connected_components (with values)
at 1024^2, with GB/s and the share of copy bandwidth. Outputs are checked equal first (value
sums to float32 rounding: the summation order changed between builds).

    python -m bench.ab_native /path/to/baseline/_C.cpython-311-x86_64-linux-gnu.so [rounds]
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Callable

import numpy as np

import icl._C as current
from bench._bandwidth import copy_bandwidth
from bench.bench_components import CASES as COMPONENT_CASES
from bench.bench_palette import _palette, _predictions
from icl.ops import TURBO_TABLE, turbo_encode
from icl.ops._turbo_table import depth_of_bin


def _load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("baseline._C", path)  # the init symbol is PyInit__C
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(baseline_path: str, rounds: int) -> None:
    builds = {"baseline": _load(baseline_path), "current": current}
    palette = _palette()
    predictions = _predictions(palette, 8)
    one = np.ascontiguousarray(predictions[:1])
    yy, xx = np.mgrid[0:1024, 0:1024]
    noise = np.random.default_rng(0).normal(0, 8, (1024, 1024, 3))
    depth_image = np.clip(turbo_encode(5 + 4.9 * np.sin(yy / 90.0) * np.cos(xx / 70.0), 0, 10) + noise, 0, 255)
    turbo = depth_image.round().astype(np.uint8)[None]
    table, centres = np.ascontiguousarray(TURBO_TABLE), depth_of_bin(0.0, 10.0)
    for images in (one, predictions):
        np.testing.assert_array_equal(*(m.nearest_palette(images, palette) for m in builds.values()))
    np.testing.assert_array_equal(*(m.turbo_decode(turbo, table, centres) for m in builds.values()))
    masks = {}
    for kind in ("blobs", "random"):
        mask, values = COMPONENT_CASES[kind]()
        masks[kind] = (mask[None], values[None])
        got = [m.connected_components(masks[kind][0], 8, masks[kind][1]) for m in builds.values()]
        for field, (a, b) in enumerate(zip(*got)):
            if field in (5, 6):
                np.testing.assert_allclose(a, b, rtol=1e-6)
            else:
                np.testing.assert_array_equal(a, b)
    shifts = {name: 0 for name in builds}

    def new_palette(name: str, m: ModuleType) -> np.ndarray:
        shifts[name] += 1  # a palette neither build's cache has seen
        return np.asarray(m.nearest_palette(one, np.ascontiguousarray(np.roll(palette, shifts[name], axis=0))))

    cases: dict[str, tuple[Callable[[str, ModuleType], object], int]] = {
        "nearest_palette b1": (lambda _, m: m.nearest_palette(one, palette), 1),
        "nearest_palette b8": (lambda _, m: m.nearest_palette(predictions, palette), 8),
        "nearest_palette new palette b1": (new_palette, 1),
        "turbo_decode b1": (lambda _, m: m.turbo_decode(turbo, table, centres), 1),
        "components blobs+values b1": (lambda _, m: m.connected_components(masks["blobs"][0], 8, masks["blobs"][1]), 1),
        "components random+values b1": (lambda _, m: m.connected_components(masks["random"][0], 8, masks["random"][1]), 1),
    }
    bytes_per_pixel = {"components": 9}  # mask in, float32 values in, int32 labels out; else RGB in, 4 B out
    bandwidth = copy_bandwidth()
    for case, (fn, items) in cases.items():
        times: dict[str, list[float]] = {name: [] for name in builds}
        for name, m in builds.items():
            for _ in range(8):  # repeated-palette caches reach their steady state
                fn(name, m)
        order = list(builds.items())
        for r in range(rounds):
            for name, m in order if r % 2 else order[::-1]:
                start = time.perf_counter()
                fn(name, m)
                times[name].append(time.perf_counter() - start)
        nbytes = items * 1024 * 1024 * bytes_per_pixel.get(case.split()[0], 7)
        med = {name: statistics.median(t) for name, t in times.items()}
        cells = [f"{name} {items / s:7.1f} img/s {nbytes / s / 1e9:5.1f} GB/s {nbytes / s / bandwidth:4.0%}"
                 for name, s in med.items()]
        print(f"{case:31s} " + " | ".join(cells) + f" | current/baseline {med['baseline'] / med['current']:.2f}x")
    print(f"copy bandwidth {bandwidth / 1e9:.1f} GB/s; /proc/loadavg {Path('/proc/loadavg').read_text().strip()}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)
