"""CoBSAT's published release, as ``python -m icl.data fetch cobsat`` fetches it
(``CoBSAT.releases``), and the checks this benchmark makes of a local copy
(``CoBSAT.check_release``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from icl.benchmarks.cobsat.data import MissingCaption, ReleaseImages
from icl.benchmarks.cobsat.vocab import THEMES, VOCAB
from icl.data.release import HubRelease, ReleaseError

RELEASES: dict[str, HubRelease] = {
    # huggingface.co/datasets/yzeng58/CoBSAT, commit 99928c5 ("Upload 517 files": the captions
    # datasets/{theme}.csv and the images datasets/{attr_type}_{obj}/{attr}_{obj}.jpg, with a
    # datasets loading script CoBSAT.py that icl neither downloads nor runs); the authors' README
    # (github.com/UW-Madison-Lee-Lab/CoBSAT, "Step 2: Download Dataset") points to the same
    # dataset's datasets.zip; no licence file is published
    "cobsat": HubRelease("yzeng58/CoBSAT", "99928c5d1fde398973efef652be9879313b63c5d", ("datasets",), (),
                         "no licence stated", "huggingface.co/datasets/yzeng58/CoBSAT (commit 99928c5; "
                         "github.com/UW-Madison-Lee-Lab/CoBSAT README.md, 'Step 2: Download Dataset')",
                         allow_patterns=("datasets/*",)),
}


def check(root: Path) -> dict[str, Any]:
    """The checks ``cobsat`` makes of a local release, on every theme: each theme's 100 images
    (``datasets/{attr_type}_{obj}/{attr}_{obj}.jpg``, the benchmark's own :class:`ReleaseImages`)
    exist, and its captions file (``datasets/{theme}.csv``, read by the caption variant) parses
    when it is there (the images it captions are counted). Returns the counts (images and
    captions per theme, images in all); :class:`~icl.data.release.ReleaseError` otherwise."""
    try:
        release = ReleaseImages(Path(root))
    except ValueError as exc:
        raise ReleaseError(f"CoBSAT release at {root}: {exc}") from None
    themes: dict[str, dict[str, int]] = {}
    for name, theme in THEMES.items():
        pairs = [(a, o) for a in VOCAB[theme.attribute] for o in VOCAB[theme.object]]
        missing = [m for a, o in pairs if (m := release.missing(theme, a, o)) is not None]
        if missing:
            raise ReleaseError(f"CoBSAT release at {root}: theme {name}: {len(missing)} of its {len(pairs)} images "
                               f"missing after unpacking (first: {missing[0].removeprefix('missing image ')})")
        captions = 0
        if (release.root / "datasets" / f"{name}.csv").is_file():
            for a, o in pairs:
                try:
                    release.caption(theme, a, o)
                    captions += 1
                except MissingCaption:  # an image without a caption fails the caption variant's item only
                    pass
                except ValueError as exc:
                    raise ReleaseError(f"CoBSAT release at {root}: {exc}") from None
        themes[name] = {"images": len(pairs), "captions": captions}
    return {"themes": themes, "images": sum(t["images"] for t in themes.values())}


def summary(counts: dict[str, Any]) -> str:
    """:func:`check`'s counts in a few words."""
    return f"{len(counts.get('themes', {}))} themes, {counts.get('images', 0)} images"
