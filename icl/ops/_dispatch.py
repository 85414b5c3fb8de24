"""Backend dispatch for the public kernels.

Each op declares its implementations, one per backend, each with a ``supports`` check that
returns ``None`` when it can serve the call or a sentence saying why it cannot. Automatic
selection walks the backends in preference order (``cpu`` before ``reference`` for CPU
tensors, ``triton``/``cuda`` before ``reference`` for CUDA tensors) and logs why each
skipped backend refused. ``ICL_BACKEND=name`` (or ``backend=`` on the call) forces one
backend and raises :class:`BackendError` if it cannot serve.

When a preferred backend cannot run at all (the native module failed to build or load, triton
or numba is missing), the first call that falls back to a slower backend warns once, with
the reason and the backend chosen; ``ICL_STRICT_BACKEND=1`` turns that fallback into a
:class:`BackendError`. :func:`backends_used` reports which backend ran each op in this process.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Optional

from icl._parse import env_bool

log = logging.getLogger("icl.ops")

BACKENDS = ("reference", "cpu", "triton", "cuda")
_CPU_ORDER = ("cpu", "reference")
_CUDA_ORDER = ("triton", "cuda", "reference")


class BackendError(RuntimeError):
    """A requested backend cannot serve a call, or no backend can."""


class BackendFallbackWarning(RuntimeWarning):
    """A preferred backend is unavailable here; a slower one serves the op instead."""


STRICT_ENV = "ICL_STRICT_BACKEND"
_lock = threading.Lock()
_used: dict[str, list[str]] = {}  # op name -> backends that ran it, in order of first use
_warned: set[str] = set()  # unavailable backends already warned about


def backends_used() -> dict[str, str]:
    """Op name -> the backend that ran it in this process (``"cpu, reference"`` when calls of
    one op ran on several, in order of first use). Ops never called are absent."""
    with _lock:
        return {name: ", ".join(names) for name, names in sorted(_used.items())}


def record_backend(op_name: str, backend: str) -> None:
    names = _used.get(op_name)
    if names is not None and backend in names:  # already recorded: no lock on the hot path
        return
    with _lock:
        names = _used.setdefault(op_name, [])
        if backend not in names:
            names.append(backend)


def _strict() -> bool:
    return env_bool(STRICT_ENV)


def warn_fallback(op_name: str, skipped: list[tuple[str, str]], chosen: str) -> None:
    """Warn once per unavailable backend (or raise under ICL_STRICT_BACKEND=1)."""
    reasons = "; ".join(f"{name}: {why}" for name, why in skipped)
    if _strict():
        raise BackendError(f"{op_name}: {reasons}; {STRICT_ENV}=1 forbids falling back to {chosen!r}")
    with _lock:
        fresh = [name for name, _ in skipped if name not in _warned]
        _warned.update(fresh)
    if fresh:
        warnings.warn(f"icl.ops: {reasons}; {op_name} (and every op that needs it) falls back to the "
                      f"{chosen!r} backend, which is slower. Set {STRICT_ENV}=1 to make this an error.",
                      BackendFallbackWarning, stacklevel=4)


@lru_cache(maxsize=None)
def backend_status(name: str) -> tuple[bool, str]:
    """Whether backend ``name`` can run at all here, and why (not). Probed on first use."""
    if name == "reference":
        return True, "pure torch, always available"
    if name == "cpu":
        # Idle OpenMP threads spin by default; on small shared machines a spinning team steals
        # the core its partner needs (measured 2-4x slower). libgomp reads this once, when the
        # native module first loads it; a user's own setting wins.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            mod = importlib.import_module("icl._C")
        except ImportError as exc:
            return False, f"native module icl._C is not built or failed to load ({exc})"
        info = dict(mod.build_info)
        omp = f"OpenMP, {mod.max_threads()} threads" if info.get("openmp") else "no OpenMP"
        level = f", hot loops at {mod.cpu_level()}" if hasattr(mod, "cpu_level") else ""
        return True, f"icl._C ({info.get('compiler')}, {info.get('build_type')}, {omp}{level})"
    if name == "triton":
        try:
            import triton  # type: ignore[import-untyped]
        except ImportError as exc:
            return False, f"triton is not installed ({exc}); pip install 'icl-eval[gpu]'"
        if os.environ.get("TRITON_INTERPRET") == "1":
            return True, f"triton {triton.__version__} in interpreter mode (TRITON_INTERPRET=1)"
        import torch

        if not torch.cuda.is_available():
            return False, "triton is installed but no CUDA device is visible"
        return True, f"triton {triton.__version__} on {torch.cuda.get_device_name()}"
    if name == "cuda":
        try:
            from numba import cuda
        except ImportError as exc:
            return False, f"numba is not installed ({exc}); pip install 'icl-eval[gpu]'"
        if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
            return True, "numba.cuda simulator (NUMBA_ENABLE_CUDASIM=1)"
        try:
            available = bool(cuda.is_available())  # type: ignore[no-untyped-call]
        except Exception as exc:  # numba raises several driver errors here
            return False, f"numba.cuda cannot reach a driver ({exc})"
        if not available:
            return False, "numba is installed but no CUDA device is visible"
        return True, "numba.cuda on a CUDA device"
    raise BackendError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}")


def native() -> Any:
    """The native module ``icl._C`` (untyped: a pybind11 extension), imported on first use."""
    return importlib.import_module("icl._C")


Supports = Callable[..., Optional[str]]
Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def _always(*args: Any, **kwargs: Any) -> Optional[str]:
    return None


@dataclass
class Op:
    """A public kernel with one implementation per backend."""

    name: str
    gpu_module: Optional[str] = None
    impls: dict[str, tuple[Callable[..., Any], Supports]] = field(default_factory=dict)
    _gpu_loaded: bool = False

    def _load_gpu(self) -> None:
        # GPU implementations live in their own module (icl.ops._gpu.*) and register
        # themselves when imported; importing it must not import triton or numba.
        if self._gpu_loaded or not self.gpu_module:
            return
        self._gpu_loaded = True
        try:
            importlib.import_module(self.gpu_module)
        except ModuleNotFoundError as exc:
            missing = exc.name or ""
            if not (self.gpu_module == missing or self.gpu_module.startswith(missing + ".")):
                raise

    def register(self, backend: str, supports: Supports = _always) -> Decorator:
        """Decorator: register ``fn`` as this op's implementation on ``backend``."""
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}")

        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.impls[backend] = (fn, supports)
            return fn

        return deco

    def refusal(self, backend: str, device_type: str, *args: Any, **kwargs: Any) -> Optional[str]:
        """Why ``backend`` cannot serve this call, or None when it can."""
        if backend not in self.impls:
            return f"{self.name} has no {backend} implementation"
        ok, why = backend_status(backend)
        if not ok:
            return why
        if backend == "cpu" and device_type != "cpu":
            return f"the cpu backend takes CPU tensors, got a {device_type} tensor"
        if backend in ("triton", "cuda") and device_type != "cuda":
            interp = os.environ.get("TRITON_INTERPRET") == "1" or os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
            if not interp:
                return f"the {backend} backend takes CUDA tensors, got a {device_type} tensor"
        return self.impls[backend][1](*args, **kwargs)

    def select(self, device_type: str, *args: Any, backend: Optional[str] = None, **kwargs: Any) -> str:
        """The backend that will serve this call (see the module docstring)."""
        self._load_gpu()
        forced = backend or os.environ.get("ICL_BACKEND") or None
        if forced:
            if forced not in BACKENDS:
                raise BackendError(f"{self.name}: unknown backend {forced!r}; known: {', '.join(BACKENDS)}")
            why = self.refusal(forced, device_type, *args, **kwargs)
            if why is not None:
                raise BackendError(f"{self.name}: backend {forced!r} was requested but cannot serve: {why}")
            return forced
        order = _CUDA_ORDER if device_type == "cuda" else _CPU_ORDER
        reasons: list[str] = []
        unavailable: list[tuple[str, str]] = []  # implemented here but unable to run at all
        for name in order:
            why = self.refusal(name, device_type, *args, **kwargs)
            if why is None:
                if unavailable:
                    warn_fallback(self.name, unavailable, name)
                if reasons:
                    log.debug("%s: using %s (%s)", self.name, name, "; ".join(reasons))
                return name
            reasons.append(f"{name}: {why}")
            if name in self.impls and not backend_status(name)[0]:
                unavailable.append((name, why))
        raise BackendError(f"{self.name}: no backend can serve this call: " + "; ".join(reasons))

    def __call__(self, device_type: str, *args: Any, backend: Optional[str] = None, **kwargs: Any) -> Any:
        name = self.select(device_type, *args, backend=backend, **kwargs)
        record_backend(self.name, name)
        return self.impls[name][0](*args, **kwargs)


_OPS: dict[str, Op] = {}


def op(name: str, gpu_module: Optional[str] = None) -> Op:
    """The op registered under ``name``, created on first use.

    ``gpu_module`` names the module holding its triton/cuda implementations, imported on the
    first dispatch.
    """
    if name not in _OPS:
        _OPS[name] = Op(name, gpu_module=gpu_module)
    elif gpu_module and not _OPS[name].gpu_module:
        _OPS[name].gpu_module = gpu_module
    return _OPS[name]


def registered_ops() -> dict[str, Op]:
    """Every op created so far, by name."""
    return dict(_OPS)
