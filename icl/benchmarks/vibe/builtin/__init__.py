"""Built-in datasets that need no download, generated deterministically into a cache directory.

- ``scenes-a``: indoor procedural scenes (wall, floor, balls, crates, cones; depth 0-10 m,
  rain pairs, thermal-like modality), all 13 tasks.
- ``scenes-b``: outdoor procedural scenes (sky with invalid depth, ground, trees, rocks,
  houses; void instance boundaries; depth 0-20 m; haze pairs, surface-normal modality),
  all 13 tasks.
- ``photos``: crops of the colour photographs bundled with scikit-image; inpainting,
  denoising, colorization, rotation, flip and artifact removal (low-light pairs).

Each is written once in the canonical format (``{cache}/builtin/{name}-g{N}.{source hash}-{fast|full}``,
the cache being ``$ICL_CACHE`` or ``~/.cache/icl``: never the user's data root) and then read back
through the same validating loader as real data.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import Callable

from icl.data.dataset import TASK_PARTS, Dataset, DatasetMeta, load_dataset
from icl.data.seeds import ANY, rng
from icl.data.registry import cache_root, register_dataset
from icl.data.writer import DatasetWriter, build_once

GENERATOR_VERSION = "1"
_SEED = "builtin"


@dataclass(frozen=True)
class Builtin:
    name: str
    description: str
    fast_size: tuple[int, int]  # (H, W)
    full_size: tuple[int, int]
    fast_count: int
    full_count: int
    meta: Callable[[str, str], DatasetMeta]  # (name, version) -> meta
    build: Callable[[DatasetWriter, "Builtin", bool], None]


def _scene_meta(style_name: str) -> Callable[[str, str], DatasetMeta]:
    def meta(name: str, version: str) -> DatasetMeta:
        from icl.benchmarks.vibe.builtin.scenes import INDOOR, OUTDOOR

        style = INDOOR if style_name == "indoor" else OUTDOOR
        pairs = {"artifact_removal": style.artifact, "modality_transfer": style.modality, "object_removal": "removed"}
        return DatasetMeta(
            name=name,
            version=version,
            tasks=tuple(TASK_PARTS),
            classes=style.classes,
            depth_range=style.depth_range,
            description=BUILTINS[name].description,
            pairs=tuple(sorted(pairs.items())),
        )

    return meta


def _build_scenes(style_name: str) -> Callable[[DatasetWriter, Builtin, bool], None]:
    def build(writer: DatasetWriter, spec: Builtin, fast: bool) -> None:
        from icl.benchmarks.vibe.builtin.scenes import INDOOR, OUTDOOR, make_scene

        style = INDOOR if style_name == "indoor" else OUTDOOR
        h, w = spec.fast_size if fast else spec.full_size
        for k in range(spec.fast_count if fast else spec.full_count):
            sid = f"s{k:04d}"
            writer.add(sid, **make_scene(style, rng(_SEED, spec.name, ANY, sid, "render"), h, w))

    return build


def _photos_meta(name: str, version: str) -> DatasetMeta:
    return DatasetMeta(
        name=name,
        version=version,
        tasks=("inpainting", "denoising", "colorization", "rotation", "flip", "artifact_removal"),
        description=BUILTINS[name].description,
        pairs=(("artifact_removal", "lowlight"),),
    )


def _build_photos(writer: DatasetWriter, spec: Builtin, fast: bool) -> None:
    from icl.benchmarks.vibe.builtin.effects import low_light
    import numpy as np

    from icl.benchmarks.vibe.builtin.photos import PHOTOS, crop, load_photo

    h, w = spec.fast_size if fast else spec.full_size
    cache: dict[str, np.ndarray] = {}
    for k in range(spec.fast_count if fast else spec.full_count):
        name, j = PHOTOS[k % len(PHOTOS)], k // len(PHOTOS)
        photo = cache.setdefault(name, load_photo(name))
        sid = f"{name.replace('_', '-')}-{j}"
        gen = rng(_SEED, spec.name, ANY, sid, "render")
        image = crop(photo, gen, h, w, zoom=(1.0, 0.6, 0.4)[j % 3])
        writer.add(sid, image, paired={"lowlight": low_light(image, gen)})


BUILTINS: dict[str, Builtin] = {
    "scenes-a": Builtin(
        "scenes-a",
        "procedural indoor scenes: balls, crates and cones on a checkered floor before a wall",
        (72, 96), (240, 320), 12, 64, _scene_meta("indoor"), _build_scenes("indoor"),
    ),
    "scenes-b": Builtin(
        "scenes-b",
        "procedural outdoor scenes: trees, rocks and houses on grass under a sky (invalid depth)",
        (80, 64), (256, 192), 12, 64, _scene_meta("outdoor"), _build_scenes("outdoor"),
    ),
    "photos": Builtin(
        "photos",
        "crops of the colour photographs bundled with scikit-image (skimage.data)",
        (64, 88), (240, 336), 12, 30, _photos_meta, _build_photos,
    ),
}


@lru_cache(maxsize=1)
def generator_hash() -> str:
    """Short SHA-256 of the generator's source: any change to it regenerates the cache."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:10]


def data_version(fast: bool) -> str:
    return f"g{GENERATOR_VERSION}.{generator_hash()}-{'fast' if fast else 'full'}"


def cache_path(name: str, fast: bool) -> Path:
    return cache_root() / "builtin" / f"{name}-{data_version(fast)}"


def builtin_dataset(name: str, root: Path, fast: bool) -> Dataset:
    """Generate (once, in icl's cache, whatever ``root`` is) and load built-in dataset ``name``."""
    spec = BUILTINS[name]
    final = build_once(cache_path(name, fast),
                       lambda tmp: spec.build(DatasetWriter(tmp, spec.meta(name, data_version(fast))), spec, fast),
                       "meta.json")
    return load_dataset(final)


def register_builtins() -> None:
    """Make every built-in resolvable through ``icl.data.get_dataset`` (idempotent)."""
    for name in BUILTINS:
        register_dataset(name, partial(_builtin_factory, name), overwrite=True)


def _builtin_factory(name: str, root: Path, fast: bool) -> Dataset:
    return builtin_dataset(name, root, fast)


register_builtins()
