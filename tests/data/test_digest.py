"""A dataset's content digest (icl.data.digest): changes with any content file, even one edited with
its size and mtime restored (the cache is keyed by inode, size, mtime and ctime); ignores the
manifest, the report and hidden files."""

from __future__ import annotations

import json
import os
import time

import numpy as np

from icl.data.dataset import DatasetMeta, load_dataset
from icl.data.digest import cache_path, content_digest
from icl.data.writer import DatasetWriter

META = DatasetMeta(name="tiny", version="1", tasks=("edges",))


def _write(root):
    writer = DatasetWriter(root, META)
    for i in range(3):
        edges = np.zeros((6, 8), bool)
        edges[i] = True
        writer.add(f"s{i}", np.full((6, 8, 3), 40 * i, np.uint8), edges=edges)
    return root


def test_digest_follows_content_not_metadata(tmp_path):
    root = _write(tmp_path / "tiny")
    first = content_digest(root)
    assert json.loads(cache_path(root).read_text())["files"]  # cached per file, outside the dataset
    assert sorted(p.name for p in root.iterdir()) == ["edges", "images", "meta.json"]
    (root / "manifest.json").write_text("{}")
    (root / "convert-report.json").write_text("{}")
    (root / ".hidden").write_text("x")
    assert content_digest(root) == first == load_dataset(root).content_digest()
    # same size, mtime put back: only ctime tells, and the digest follows the bytes
    path = root / "images" / "s1.png"
    st = os.stat(path)
    data = bytearray(path.read_bytes())
    data[-20] ^= 0xFF
    time.sleep(0.01)
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert content_digest(root) != first
