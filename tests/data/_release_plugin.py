"""A plugin benchmark that publishes its data on the Hub (tests/data/test_fetch_plugin.py): it
declares the release, its alias and its check itself, and ``python -m icl.data fetch NAME``
fetches it through the benchmark registry with nothing in icl/run naming it (loaded through an
entry point in subprocesses, registered directly in-process)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any, Mapping

from icl.benchmarks.base import Benchmark, Item
from icl.data.release import HubRelease, ReleaseError
from icl.models.requests import ChatRequest

REPO = "plugin-author/mirror-pack"
IMAGES = ("a.png", "b.png", "c.png")


def published_files(skip: tuple[str, ...] = ()) -> dict[str, bytes]:
    """The release as its author publishes it: ``pack/index.json`` naming the images, the images
    in ``pack/images.zip`` (stored, fixed dates: the same bytes every time, so the same commit on
    tests/models/hub_server.py), and a README outside the folder fetch copies."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name in IMAGES:
            if f"images/{name}" not in skip:
                z.writestr(zipfile.ZipInfo(f"images/{name}", date_time=(2024, 1, 1, 0, 0, 0)),
                           f"not really a png: {name}".encode())
    return {"pack/index.json": json.dumps(list(IMAGES)).encode(), "pack/images.zip": buf.getvalue(),
            "README.md": b"# mirror-pack\n"}


# the commit tests/models/hub_server.py gives published_files() as the first commit of
# datasets/plugin-author/mirror-pack (the test checks it): pinned, as a real plugin pins its release
COMMIT = "ad14a66d3d43565d4cc74561167a2e44aff90047"


class MirrorPack(Benchmark):
    """Asks a chat model to name each image of its pack (enough of a benchmark to be registered)."""

    name = "mirror-pack"
    protocol = "mirror-pack-1"
    request_types = (ChatRequest,)
    default_models = ("copy-last",)
    releases = {"mirror-pack": HubRelease(REPO, COMMIT, ("pack",), ("images.zip",), "CC0-1.0",
                                          "tests/data/_release_plugin.py")}
    release_aliases = {"mirrorpack": "mirror-pack"}

    @classmethod
    def check_release(cls, name: str, root: Path) -> dict[str, Any]:
        try:
            index = json.loads((Path(root) / "pack" / "index.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ReleaseError(f"mirror-pack release at {root}: pack/index.json unreadable ({exc})") from None
        missing = [n for n in index if not (Path(root) / "pack" / "images" / n).is_file()]
        if missing:
            raise ReleaseError(f"mirror-pack release at {root}: pack/images/{missing[0]} is missing after unpacking")
        return {"images": len(index)}

    @classmethod
    def release_summary(cls, name: str, counts: Mapping[str, Any]) -> str:
        return f"{counts['images']} pack images"

    def items(self):
        return [Item(name, {"task": "name"}, name) for name in IMAGES]

    def request(self, item, privileged=False):
        return ChatRequest.user(item.key, f"Name {item.payload}.", max_new_tokens=4)

    def score(self, item, response, judgements=()):
        return {"accuracy": float(str(response).strip() == item.payload)}

    def summarise(self, rows):
        return {}
