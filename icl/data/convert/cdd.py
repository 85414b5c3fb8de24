"""CDD-11 (OneRestore): the test split, 200 scenes per degradation type.

Raw layout: ``CDD-11_test/clear/<name>.png`` and ``CDD-11_test/<type>/<name>.png`` for the 11
types (``haze``, ``haze_rain``, ``haze_snow``, ``low``, ``low_haze``, ``low_haze_rain``,
``low_haze_snow``, ``low_rain``, ``low_snow``, ``rain``, ``snow``), a degraded image named as
its clear one. Writes ``cdd`` (the clear images: inpainting, denoising, colorization,
rotation, flip) and one ``cdd-<type>`` per type (clear image + ``paired/<type>``: artifact
removal), so that every query's context has its degradation type (PROTOCOL §1.2). The first
200 clear images in name order are used, as the paper does.
"""

from __future__ import annotations

from pathlib import Path

from icl.data.convert._common import Conversion, ConvertError, RawError, Report, read_image, same_size, sample_id
from icl.data.dataset import DatasetMeta

TYPES = ("haze", "haze_rain", "haze_snow", "low", "low_haze", "low_haze_rain", "low_haze_snow", "low_rain",
         "low_snow", "rain", "snow")
PER_TYPE = 200
EXTS = (".png", ".jpg", ".jpeg")


def _root(raw: Path) -> Path:
    for cand in (raw / "CDD-11_test", raw / "test", raw):
        if (cand / "clear").is_dir():
            return cand
    raise ConvertError(f"no clear/ folder under {raw} or {raw / 'CDD-11_test'}: expected the CDD-11 test split")


def convert(raw: Path, out: Path, global_seed: int) -> list[Report]:
    root = _root(raw)
    clear = sorted(p for p in (root / "clear").iterdir() if p.suffix.lower() in EXTS)
    chosen, beyond = clear[:PER_TYPE], clear[PER_TYPE:]
    base = DatasetMeta(name="cdd", version="CDD-11-test-200", tasks=(
        "inpainting", "denoising", "colorization", "rotation", "flip"),
        description="CDD-11 test split: the clear images")
    conv = Conversion(out, base, raw, "cdd")
    images = {}
    for path in chosen:
        try:
            image = read_image(path)
        except Exception as err:  # one image's failure is that image's
            conv.bad(err, path)
            continue
        images[path.stem] = image.shape
        conv.add(sample_id(path.stem), image, raw=(path,), source=path)
    for path in beyond:
        conv.drop(sample_id(path.stem), f"beyond the first {PER_TYPE} test images")
    reports = [conv.finish()]
    for kind in TYPES:
        folder = root / kind
        if not folder.is_dir():
            raise ConvertError(f"missing degradation folder {folder}")
        degraded = {p.stem: p for p in folder.iterdir() if p.suffix.lower() in EXTS}
        meta = DatasetMeta(name=f"cdd-{kind}", version="CDD-11-test-200", tasks=("artifact_removal",),
                           pairs=(("artifact_removal", kind),),
                           description=f"CDD-11 test split: {kind.replace('_', '+')} -> clear")
        sub = Conversion(out, meta, raw, "cdd", {"type": kind})
        for path in chosen:
            if path.stem not in images:
                continue
            try:
                pair = degraded.get(path.stem)
                if pair is None:
                    raise RawError(path, f"no {kind}/{path.stem}.* degraded image for this clear image")
                low = read_image(pair)
                same_size(pair, low.shape, images[path.stem], f"{kind} image")
                clear_image = read_image(path)
            except Exception as err:  # one pair's failure is that pair's
                sub.bad(err, pair or path)
                continue
            sub.add(sample_id(path.stem), clear_image, raw=(path, pair), source=path, paired={kind: low})
        reports.append(sub.finish())
    return reports
