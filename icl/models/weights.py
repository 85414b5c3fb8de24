"""Weight files: where they are looked up, how they are checked, and their identity.

A model finds its files from an explicit source (the ``weights`` model argument: a local path,
or a Hub reference ``hf:ORG/NAME[@REVISION][/SUBPATH]`` that :mod:`icl.models.hub` downloads
into the Hugging Face cache) or under ``$ICL_WEIGHTS_DIR/<model name>/``; nothing else is
ever downloaded. A ``<file>.sha256`` beside a file
(the hex digest, optionally followed by the file name, as ``sha256sum`` writes it) is checked
before use, for a file argument and for every file of a folder argument (LVM ``vqgan/``,
``llm/``, SD ``unet/``). Digests are cached so a multi-GB file is hashed once, keyed on
everything that changes when its bytes do: path, device, inode, size, mtime and ctime (a
replacement restored to the old size and mtime still has a new ctime, which users cannot set).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from icl.models.errors import WeightsError as WeightsError

PathLike = Union[str, os.PathLike]

_lock = threading.Lock()


def weights_dir(model: str) -> Optional[Path]:
    """``$ICL_WEIGHTS_DIR/<model>`` when the variable is set, else None."""
    base = os.environ.get("ICL_WEIGHTS_DIR")
    return Path(base).expanduser() / model if base else None


def resolve_weights(model: str, weights: Optional[PathLike], filename: str,
                    patterns: Optional[Sequence[str]] = None, argument: str = "weights") -> Path:
    """The weight file (or ``from_pretrained`` folder) ``model`` loads: ``weights`` when given
    (a file, or a folder holding ``filename``; ``hf:ORG/NAME[@REVISION][/SUBPATH]`` is resolved
    to its snapshot in the Hugging Face cache, downloading the files ``patterns`` select, default
    :data:`icl.models.hub.DEFAULT_PATTERNS`, and ``filename``), else
    ``$ICL_WEIGHTS_DIR/<model>/<filename>``. ``hf:default`` is the family's official Hub
    reference (:data:`icl.models.hub.OFFICIAL`, keyed by ``model`` and ``argument``), also used
    when nothing else is given and ``ICL_HUB_DEFAULTS=1`` allows the download. Raises
    :class:`WeightsError` naming the file and where to put it; checks a ``.sha256`` beside a file."""
    from icl.models import hub

    candidates: list[Path] = []
    snap = None
    entry = hub.OFFICIAL.get((model, argument))
    if weights is None and entry is not None and entry.ref is not None and hub.downloads_allowed():
        base = weights_dir(model)
        if base is None or not (base / filename).exists():
            weights = hub.DEFAULT
    weights = hub.expand_default(weights, model, argument)
    if isinstance(weights, str) and weights.startswith("hf:"):
        # the official repository's pickles the family loads (LVM's VQGAN pytorch_model.bin)
        extra = entry.files if entry is not None and entry.ref == weights else ()
        snap = hub.resolve(weights, patterns, also=(filename, *extra))
        p = snap.path
        candidates = [p / filename, p] if p.is_dir() else [p]
    elif weights is not None:
        p = Path(weights).expanduser()
        candidates = [p / filename, p] if p.is_dir() else [p]
    else:
        base = weights_dir(model)
        if base is not None:
            candidates = [base / filename]
    for path in candidates:
        if path.exists():
            if path.is_file():
                verify_sidecar(path)
            elif path.is_dir():
                verify_folder(path)
            return path
    if snap is not None:
        raise WeightsError(f"{model}: {weights} (commit {snap.commit}) has no {filename!r} "
                           f"(downloaded: {', '.join(snap.files) or 'nothing'})")
    where = (f"--model-arg weights=PATH (a file, or a folder holding {filename}) or "
             f"$ICL_WEIGHTS_DIR/{model}/{filename}")
    tried = ", ".join(str(c) for c in candidates) or "nothing (no weights argument, ICL_WEIGHTS_DIR unset)"
    if entry is not None and entry.ref is not None:
        hub_hint = (f"{argument}=hf:default (the official {entry.ref}; ICL_HUB_DEFAULTS=1 uses it when nothing "
                    f"is given) or another Hub repository ({argument}=hf:ORG/NAME[@REVISION][/SUBPATH])")
    else:
        hub_hint = f"name its Hub repository ({argument}=hf:ORG/NAME[@REVISION][/SUBPATH])"
    raise WeightsError(f"{model}: weights {filename!r} not found (tried {tried}); put the official file "
                       f"at {where}, or {hub_hint}; docs/models.md says where they are published")


def verify_sidecar(path: Path) -> None:
    """Check ``path`` against ``path.sha256`` when that file exists."""
    sidecar = path.with_name(path.name + ".sha256")
    if not sidecar.is_file():
        return
    words = sidecar.read_text(encoding="utf-8", errors="replace").split()
    expected = words[0].lower() if words else ""
    if len(expected) != 64:
        raise WeightsError(f"{sidecar}: expected a 64-digit SHA-256 hex digest, found {expected[:80]!r}")
    actual = file_digest(path)
    if actual != expected:
        raise WeightsError(f"{path}: SHA-256 {actual} does not match {sidecar} ({expected}); "
                           f"the file is corrupt or not the published one")


def verify_folder(folder: Path) -> None:
    """Check every ``<file>.sha256`` inside ``folder`` (recursively) against its file; a
    sidecar whose file is missing is an error too (a partial copy)."""
    for sidecar in sorted(folder.rglob("*.sha256")):
        target = sidecar.with_name(sidecar.name[: -len(".sha256")])
        if not target.is_file():
            raise WeightsError(f"{sidecar}: its file {target.name} is missing (incomplete copy of {folder})")
        verify_sidecar(target)


def _cache_file() -> Path:
    base = os.environ.get("ICL_CACHE")
    return (Path(base).expanduser() if base else Path.home() / ".cache" / "icl") / "digests.json"


def file_digest(path: PathLike) -> str:
    """SHA-256 (hex) of a file, cached by absolute path, device, inode, size, mtime and ctime."""
    p = Path(path).resolve()
    try:
        st = p.stat()
    except OSError as exc:
        raise WeightsError(f"{p}: cannot read weight file ({exc.strerror})") from exc
    key = f"{p}|{st.st_dev}|{st.st_ino}|{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}"
    cache_path = _cache_file()
    with _lock:
        cache = _read_cache(cache_path)
        if key in cache:
            return cache[key]
    h = hashlib.sha256()
    try:
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
    except OSError as exc:
        raise WeightsError(f"{p}: cannot read weight file ({exc.strerror or exc})") from exc
    digest = h.hexdigest()
    with _lock:
        cache = _read_cache(cache_path)
        cache[key] = digest
        try:
            cache_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache_path.with_name(f"{cache_path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(json.dumps(cache, sort_keys=True), encoding="utf-8")
            os.replace(tmp, cache_path)
        except OSError:
            pass  # an unwritable cache only costs a re-hash next time
    return digest


def weight_identity(path: PathLike) -> tuple[str, Any]:
    """``(key, value)`` of a weight file or folder in a model's identity: a Hub snapshot is its
    pinned reference and ``{repo, commit, subpath, files}`` (the commit names the content: no
    re-hash, and no cache path, which differs between machines); anything else its path and
    :func:`tree_digest`."""
    from icl.models import hub

    snap = hub.snapshot_of(path)
    if snap is not None:
        return snap.pinned, snap.identity()
    return str(path), tree_digest(path)


def tree_digest(path: PathLike) -> str:
    """SHA-256 over a file, or over a folder's files (relative names and digests, sorted):
    the identity of a ``from_pretrained`` folder. Sidecars (``.sha256``) are checked."""
    p = Path(path)
    if p.is_file():
        verify_sidecar(p)
        return file_digest(p)
    if not p.is_dir():
        raise WeightsError(f"{p}: no such weight file or folder")
    verify_folder(p)
    h = hashlib.sha256()
    for f in sorted(q for q in p.rglob("*") if q.is_file() and not q.name.endswith(".sha256")):
        h.update(f"{f.relative_to(p).as_posix()}\0{file_digest(f)}\n".encode())
    return h.hexdigest()


def _read_cache(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


# the libraries whose classes a diffusers model_index.json may name and --check may build:
# never a checkpoint's own module (its code is not run)
def pipeline_architectures(folder: Path) -> list[Any]:
    """The networks of a diffusers ``save_pretrained`` pipeline folder: per component of its
    ``model_index.json`` (``"unet": ["diffusers", "UNet2DConditionModel"]``) whose class is a torch
    module of diffusers or transformers and whose subfolder holds a ``config.json``, an
    :class:`~icl.models.base.Architecture` (tokenizers, schedulers and processors are not networks;
    an unreadable index yields none: the family's own checks name it)."""
    import importlib

    from icl.models import hub
    from icl.models.base import Architecture

    try:
        index = json.loads((folder / "model_index.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    out = []
    for name, entry in sorted(index.items()) if isinstance(index, dict) else []:
        if name.startswith("_") or not (isinstance(entry, list) and len(entry) == 2):
            continue
        library, class_name = entry
        if library not in hub.PIPELINE_LIBRARIES or not isinstance(class_name, str):
            continue
        cls = getattr(importlib.import_module(library), class_name, None)
        if cls is None or not (folder / name / "config.json").is_file():
            continue
        import torch

        if isinstance(cls, type) and issubclass(cls, torch.nn.Module):
            out.append(Architecture(folder / name, cls))
    return out
