"""Weight integrity (icl/models/weights.py): the digest cache cannot go stale (a replacement of
the same size with its mtime restored is re-hashed: its ctime changed), ``.sha256`` sidecars
inside weight folders are checked, failures name the file."""

import hashlib
import os

import pytest

from icl.models.weights import WeightsError, file_digest, resolve_weights, tree_digest


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ICL_CACHE", str(tmp_path / "cache"))


def test_same_size_same_mtime_replacement_is_rehashed(tmp_path):
    f = tmp_path / "model.safetensors"
    f.write_bytes(b"A" * 4096)
    st = f.stat()
    first = file_digest(f)
    assert first == hashlib.sha256(b"A" * 4096).hexdigest()
    f.write_bytes(b"B" * 4096)  # in place: same inode, same size
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime restored; ctime cannot be
    assert f.stat().st_mtime_ns == st.st_mtime_ns and f.stat().st_size == st.st_size
    assert file_digest(f) == hashlib.sha256(b"B" * 4096).hexdigest()
    other = tmp_path / "other"
    other.write_bytes(b"C" * 4096)
    os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(other, f)  # a new inode under the old name
    assert file_digest(f) == hashlib.sha256(b"C" * 4096).hexdigest()


def test_sidecars_inside_a_weight_folder_are_checked(tmp_path):
    folder = tmp_path / "lvm" / "vqgan"
    folder.mkdir(parents=True)
    weights = folder / "pytorch_model.bin"
    weights.write_bytes(b"weights")
    (folder / "config.json").write_text("{}")
    good = hashlib.sha256(b"weights").hexdigest()
    (folder / "pytorch_model.bin.sha256").write_text(f"{good}  pytorch_model.bin\n")
    assert resolve_weights("lvm", str(folder), "vqgan") == folder
    tree_digest(folder)
    weights.write_bytes(b"weightz")  # corrupted, same size
    with pytest.raises(WeightsError, match=r"pytorch_model.bin: SHA-256 .* does not match"):
        resolve_weights("lvm", str(folder), "vqgan")
    with pytest.raises(WeightsError, match="pytorch_model.bin: SHA-256"):
        tree_digest(folder)
    weights.unlink()
    with pytest.raises(WeightsError, match="pytorch_model.bin.sha256: its file pytorch_model.bin is missing"):
        resolve_weights("lvm", str(folder), "vqgan")


def test_malformed_sidecar_and_unreadable_file_are_named(tmp_path):
    f = tmp_path / "w.pth"
    f.write_bytes(b"x")
    (tmp_path / "w.pth.sha256").write_text("not-a-digest")
    with pytest.raises(WeightsError, match=r"w.pth.sha256: expected a 64-digit"):
        resolve_weights("painter", str(f), "w.pth")
    with pytest.raises(WeightsError, match=r"missing.pth: cannot read weight file"):
        file_digest(tmp_path / "missing.pth")
