"""Models of a run: instantiation from specs, the fit check, and each model's whole identity.

The identity (PROTOCOL §1.4 "Cache keys") is everything that can change an answer: adapter name,
class and version, precision, device kind, every ``__init__`` argument with its default, the
SHA-256 of every weight file or folder the adapter reports (for a Hub reference, the commit it
resolved to and its file list instead: :func:`icl.models.weights.weight_identity`), and the SHA-256 of every other file
a string argument names (``config=model.json``, a prompt template: editing the file behind the
argument changes the answers, so it changes the id). Its digest is the ``model_id`` that keys
stored responses: a run with other precision, weights, arguments or argument files computes anew.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Container, Optional, Sequence

from icl._lazy import extra_hint
from icl.models import PRECISIONS, Adapter, UnknownModelError, get_model, list_models
from icl.models.base import REFERENCE_MODULES
from icl.models.registry import model_factory
from icl.models import hub
from icl.models.weights import WeightsError, tree_digest, weight_identity
from icl.run.planning.config import RUNNER_MODEL_ARGS, ModelSpec, closest
from icl.run.errors import CannotServe, ConfigError


@dataclass
class RunModel:
    """An instantiated (not yet loaded) model with its identity."""

    spec: ModelSpec
    adapter: Adapter
    identity: dict[str, Any]
    model_id: str
    timeout: Optional[float] = None
    loaded: bool = False
    load_error: Optional[str] = None
    calls: int = 0  # guarded model calls made (0: not yet asked)
    stopped: Optional[str] = None  # why the run stopped asking this model (load or first batch failed)
    published: Optional[dict[str, str]] = None  # the paper row it stands for (icl.report.reproduction)

    @property
    def privileged(self) -> bool:
        """Granted, not claimed: only icl's reference adapters get the ground truth."""
        return privilege_granted(self.adapter)

    @property
    def reference(self) -> bool:
        return bool(getattr(self.adapter, "reference", False))

    def serves(self, request_type: type) -> bool:
        return any(issubclass(request_type, s) for s in self.adapter.serves)

    @property
    def label(self) -> str:
        return self.spec.label


def _cpu_only_torch() -> bool:
    """Whether the installed torch (if any) is a build without CUDA or ROCm, read from its
    generated ``torch/version.py`` without importing torch (1-3 s a process, which a run whose
    benchmark and models need no torch would otherwise pay for ``--device auto`` alone)."""
    if "torch" in sys.modules:
        return False  # already imported: ask it
    spec = importlib.util.find_spec("torch")
    if spec is None:
        return True
    for folder in spec.submodule_search_locations or ():
        try:
            text = (Path(folder) / "version.py").read_text()
        except OSError:
            continue
        return all(re.search(rf"^{name}\b[^=\n]*=\s*None\s*$", text, re.M) for name in ("cuda", "hip"))
    return False


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when a CUDA device is visible, else ``cpu``; ``cuda[:N]`` checked
    against what torch sees; anything else is a ConfigError (one line)."""
    if device == "cpu":
        return device
    if device != "auto" and not re.fullmatch(r"cuda(:\d+)?", device):
        raise ConfigError(f"--device {device!r}: expected auto, cpu, cuda or cuda:N")
    if device == "auto" and _cpu_only_torch():
        return "cpu"
    try:
        import torch
    except ImportError:
        if device == "auto":
            return "cpu"
        raise ConfigError(f"--device {device}: torch is not installed") from None
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if not torch.cuda.is_available():
        build = "a CPU-only torch build" if torch.version.cuda is None else "no visible CUDA device"
        raise ConfigError(f"--device {device}: CUDA is not available here ({build}, torch {torch.__version__}); "
                          "use --device cpu or auto")
    index = int(device.partition(":")[2] or 0)
    if index >= torch.cuda.device_count():
        raise ConfigError(f"--device {device}: only {torch.cuda.device_count()} CUDA device(s) visible")
    return device


def device_kind(device: str) -> str:
    """``cpu`` or ``cuda:<device name>``: what can change a model's numbers, not which card."""
    if not device.startswith("cuda"):
        return device.split(":")[0]
    import torch

    return f"cuda:{torch.cuda.get_device_name(torch.device(device))}"


def _jsonable(v: Any) -> Any:
    try:
        json.dumps(v)
        return v
    except TypeError:
        return repr(v)


def make_model(spec: ModelSpec, device: str, dtype: Optional[str] = None,
               serves_needed: Sequence[type] = (), benchmark: str = "") -> RunModel:
    """Instantiate ``spec``; raises ConfigError for unknown names, bad arguments, a model that
    cannot serve the benchmark's requests, or missing weights."""
    try:
        factory = model_factory(spec.name)
    except UnknownModelError:
        raise ConfigError(f"unknown model {spec.name!r}{closest(spec.name, list_models())}") from None
    except ImportError as exc:
        raise ConfigError(str(exc), exc) from None
    params = _parameters(factory)
    args = dict(spec.args)
    runner_args = {k: args.pop(k) for k in RUNNER_MODEL_ARGS if k in args and k not in params}
    unknown = sorted(set(args) - set(params)) if not _takes_kwargs(factory) else []
    if unknown:
        raise ConfigError(f"model {spec.name!r} has no argument(s) {', '.join(unknown)}; it takes: "
                          f"{', '.join(sorted(set(params) | set(RUNNER_MODEL_ARGS)))}")
    # weights=hf:default is the family's official repository (icl.models.hub.OFFICIAL): expanded
    # here, so the identity records that repository at the commit it resolves to
    try:
        args = {k: hub.expand_default(v, spec.name, k) for k, v in args.items()}
    except WeightsError as exc:
        raise ConfigError(f"model {spec.name!r}: {exc}", exc) from None
    try:
        adapter = get_model(spec.name, **args)
    except ConfigError:
        raise
    except (TypeError, ValueError, WeightsError) as exc:
        raise ConfigError(f"model {spec.name!r}: {exc}", exc) from None
    except ImportError as exc:  # an optional package the adapter needs
        raise ConfigError(f"model {spec.name!r}: {exc}{extra_hint(exc)}", exc) from None
    # a model is asked only for the items whose request type it serves (the engine skips the
    # rest and lists them); it is refused only when it serves none of the benchmark's types
    fits = [t for t in serves_needed if any(issubclass(t, s) for s in adapter.serves)]
    if serves_needed and not fits:
        served = ", ".join(t.__name__ for t in adapter.serves) or "nothing"
        raise CannotServe(f"model {spec.name!r} cannot run benchmark {benchmark!r}: the benchmark sends "
                          f"{', '.join(t.__name__ for t in serves_needed)} and the model serves {served}")
    if adapter.privileged and not privilege_granted(adapter):
        raise ConfigError(f"model {spec.name!r} ({type(adapter).__module__}.{type(adapter).__qualname__}) sets "
                          f"privileged = True: only icl's built-in reference baselines (and their subclasses, "
                          f"never ranked) receive the ground truth")
    precision = runner_args.get("dtype", dtype)
    if precision is not None:
        if precision not in PRECISIONS:
            raise ConfigError(f"model {spec.name!r}: dtype {precision!r} is not one of {', '.join(PRECISIONS)}")
        adapter.precision = precision
    if "batch_size" in runner_args:
        bs = runner_args["batch_size"]
        if not isinstance(bs, int) or isinstance(bs, bool) or bs < 1:
            raise ConfigError(f"model {spec.name!r}: batch_size must be a positive integer, got {bs!r}")
        adapter.batch_size = bs
    timeout = runner_args.get("timeout")
    if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ConfigError(f"model {spec.name!r}: timeout must be a positive number of seconds, got {timeout!r}")
    try:
        paths = list(adapter.weight_files())
        weights = dict(weight_identity(p) for p in paths)
    except WeightsError as exc:
        raise ConfigError(f"model {spec.name!r}: {exc}", exc) from None
    # execution-only arguments (the adapter declares them) cannot change an answer: left out
    execution: Container[str] = getattr(adapter, "execution_args", frozenset())
    bound = {k: _jsonable(v) for k, v in _bound_arguments(factory, args).items() if k not in execution}
    # a Hub reference stands in the identity at the commit it resolved to: a branch name alone
    # never identifies weights (it moves), and hf:ORG/NAME and hf:ORG/NAME@<that commit> are one model
    bound = {k: (hub.pinned(v) or v) if hub.is_hub_ref(v) else v for k, v in bound.items()}
    _pin_adapter(adapter, spec.name, factory, set(weights))
    identity = dict(adapter=adapter.name, cls=f"{type(adapter).__module__}.{type(adapter).__qualname__}",
                    version=str(adapter.version), precision=adapter.precision, device=device_kind(device),
                    args=bound, weights=weights)
    files = _argument_files(spec.name, bound, [str(p) for p in paths])
    if files:  # only when present, so the ids of models without such arguments stay as they were
        identity["files"] = files
    model_id = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]
    return RunModel(spec, adapter, identity, model_id, float(timeout) if timeout else None)


def _pin_adapter(adapter: Adapter, family: str, factory: Any, loaded: set[str]) -> None:
    """Each Hub reference the adapter holds (an argument kept under its own name, as every
    built-in adapter keeps ``weights``, ``vqgan_weights``, ``controlnet``) is replaced by the
    reference pinned to the commit this run resolved, so an adapter pickled to a Ray worker (a
    process that resolves afresh) loads exactly the commit the identity records, even if the
    branch moved meanwhile. An argument left None that resolved to the family's official
    weights (``ICL_HUB_DEFAULTS=1``: the identity's ``weights`` names them) is pinned the same way."""
    for name in _parameters(factory):
        value = getattr(adapter, name, None)
        if value is None:
            entry = hub.OFFICIAL.get((family, name))
            value = entry.ref if entry is not None else None
            if value is None or hub.pinned(value) not in loaded:
                continue
        if not hub.is_hub_ref(value):
            continue
        pinned = hub.pinned(value)
        if pinned is not None and pinned != value:
            try:
                setattr(adapter, name, pinned)
            except AttributeError:  # a read-only property: left as given
                pass


def privilege_granted(adapter: Adapter) -> bool:
    """The ground truth goes only to icl's privileged reference baselines (:data:`REFERENCE_MODULES`)
    and their subclasses, which stay reference models (never ranked); any other adapter that sets
    ``privileged`` is refused."""
    return bool(adapter.privileged) and bool(getattr(adapter, "reference", False)) and any(
        c.__module__ in REFERENCE_MODULES and c.__dict__.get("privileged") for c in type(adapter).__mro__)


def _argument_files(model: str, args: dict[str, Any], weight_files: Sequence[str]) -> dict[str, str]:
    """``{argument: SHA-256}`` of every string argument naming an existing regular file (after
    ``~`` expansion, relative to the working directory as the adapter reads it), except the
    weight files (and files inside weight folders) already in the identity. Digests go through
    the weight digest cache."""
    covered = tuple(os.path.realpath(os.path.expanduser(p)) for p in weight_files)
    out = {}
    for name, value in args.items():
        if not isinstance(value, str) or not value or "\0" in value:
            continue
        path = os.path.expanduser(value)
        try:
            regular = os.path.isfile(path)
        except (OSError, ValueError):  # a name too long for the filesystem: not a file
            continue
        real = os.path.realpath(path)
        if regular and not any(real == c or real.startswith(c.rstrip(os.sep) + os.sep) for c in covered):
            try:
                out[name] = tree_digest(path)
            except (OSError, WeightsError) as exc:
                raise ConfigError(f"model {model!r}: argument {name}={value!r}: cannot read the file ({exc})") from None
    return out


def _parameters(factory: Any) -> dict[str, inspect.Parameter]:
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return {}
    return {n: p for n, p in sig.parameters.items()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n != "self"}


def _takes_kwargs(factory: Any) -> bool:
    try:
        return any(p.kind == p.VAR_KEYWORD for p in inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):
        return True


def _bound_arguments(factory: Any, args: dict[str, Any]) -> dict[str, Any]:
    """Every argument the factory receives, defaults included (the model's full settings)."""
    params = _parameters(factory)
    out = {n: p.default for n, p in params.items() if p.default is not inspect.Parameter.empty}
    out.update(args)
    return dict(sorted(out.items()))
