"""Reading official checkpoints: safetensors or ``torch.load(weights_only=True)``, never pickled code."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from pathlib import Path
from typing import Any, Optional

import torch
from torch import nn

from icl.models.errors import CheckpointDamaged, CheckpointRefused
from icl.models.weights import WeightsError

# Plain data containers the official training scripts pickle beside the weights (MAE's and
# Painter's misc.save_model stores the argparse Namespace under "args"); no code runs on load.
SAFE_GLOBALS = [argparse.Namespace]


class UnmappableCheckpoint(WeightsError):
    """A checkpoint in torch's legacy (pre-1.6) format: ``torch.load`` reads it only whole, so
    ``mmap=True`` (names and shapes without the tensors' bytes) cannot be had."""


# the first pickle of torch's legacy (pre-1.6) format is this number (torch.serialization.MAGIC_NUMBER)
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_STRING_OPS = {"UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "STRING", "BINSTRING", "SHORT_BINSTRING"}
_INT_OPS = {"INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4"}


def pickle_globals(f: Any) -> list[str]:
    """``module.name`` of every global the next pickle in the binary file ``f`` names (its
    ``GLOBAL`` and ``STACK_GLOBAL`` opcodes, up to its ``STOP``), read with
    :func:`pickletools.genops`: nothing is unpickled, imported or run. A ``STACK_GLOBAL``'s
    module and name are the two strings pushed before it (directly or from the memo); a
    ``STACK_GLOBAL`` is prefixed ``STACK_GLOBAL `` (``weights_only`` reads no such opcode).
    Raises ValueError for a truncated or damaged pickle."""
    import pickletools

    found: list[str] = []
    recent: list[Any] = []  # what each pushing opcode pushed: a string, or None for anything else
    memo: dict[int, Any] = {}
    for op, arg, _ in pickletools.genops(f):
        name = op.name
        if name in _STRING_OPS:
            recent.append(arg.decode("latin-1") if isinstance(arg, bytes) else arg)
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            recent.append(memo.get(int(arg)))  # type: ignore[arg-type]  # a memo index: never None
        elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[int(arg)] = recent[-1] if recent else None  # type: ignore[arg-type]  # a memo index
        elif name == "MEMOIZE":
            memo[len(memo)] = recent[-1] if recent else None
        elif name == "GLOBAL":
            found.append(str(arg).replace(" ", ".", 1))
            recent.append(None)
        elif name == "STACK_GLOBAL":
            module, attr = (recent[-2:] if len(recent) >= 2 else [None, None])
            found.append(f"STACK_GLOBAL {module if isinstance(module, str) else '?'}."
                         f"{attr if isinstance(attr, str) else '?'}")
            recent.append(None)
        elif name not in ("PROTO", "FRAME", "STOP"):
            recent.append(None)
        if len(recent) > 64:
            del recent[:-2]
    return found


def _is_legacy_magic(f: Any) -> bool:
    """Whether the next pickle in ``f`` is the one number :data:`LEGACY_MAGIC` (genops only)."""
    import pickletools

    seen = 0  # read lazily: a bare pickle's first pickle is the whole file, tensor bytes included
    for op, arg, _ in pickletools.genops(f):
        if op.name in ("PROTO", "FRAME"):
            continue
        if op.name == "STOP":
            return seen == 1
        if seen or op.name not in _INT_OPS or arg != LEGACY_MAGIC:
            return False
        seen = 1
    return False


def _weights_only_accepts(name: str, allowed: list, opaque: bool) -> bool:
    """Whether ``torch.load(weights_only=True)`` under ``safe_globals(allowed)`` would read the
    global ``name`` (torch's own allowlist and the user's), or, ``opaque``, stand in an
    :class:`OpaqueObject` for it as :func:`read_training_checkpoint` does."""
    if name.startswith("STACK_GLOBAL "):
        return False
    try:  # torch's allowlist has no public name; a torch without it: only ours and the user's
        from torch._weights_only_unpickler import _get_allowed_globals

        default = set(_get_allowed_globals())
    except (ImportError, AttributeError):
        default = set()
    user = {g[1] if isinstance(g, tuple) else f"{g.__module__}.{g.__qualname__}"
            for g in [*allowed, *torch.serialization.get_safe_globals()]}
    if name in default or name in user:
        return True
    return opaque and "." in name and name.split(".")[0] not in _CODE_MODULES


def pickle_refusal(path: Path, allowed: list, opaque: bool = False) -> Optional[str]:
    """Why ``torch.load(weights_only=True)`` refuses ``path`` (:func:`pickle_problem`'s message),
    or None when it reads it."""
    problem = pickle_problem(path, allowed, opaque)
    return None if problem is None else str(problem)


def pickle_problem(path: Path, allowed: list, opaque: bool = False) -> Optional[WeightsError]:
    """Why ``torch.load(weights_only=True)`` refuses ``path``, a file that is a pickle from its
    first byte, or None when it reads it (torch's legacy format with globals it accepts); found
    without executing anything (:func:`pickle_globals`): a bare pickle (its first pickle is not
    the legacy magic number :data:`LEGACY_MAGIC`: ``pickle.dump`` of a state dict) or a legacy
    file whose data pickle names a global ``weights_only`` does not accept
    (:class:`CheckpointRefused`), or a pickle that ends early (:class:`CheckpointDamaged`)."""
    try:
        with open(path, "rb") as f:
            if not _is_legacy_magic(f):
                return CheckpointRefused(
                    f"{path}: a bare pickle, not a torch.save checkpoint (neither a zip archive nor torch's legacy "
                    f"format, whose first pickle is the number {LEGACY_MAGIC:#x}): torch.load refuses it; save its "
                    f"state dict with torch.save or safetensors")
            for _ in range(2):  # the legacy format's protocol version and system information
                pickle_globals(f)
            names = pickle_globals(f)
    except (ValueError, EOFError, OSError) as exc:
        return CheckpointDamaged(f"{path}: not a complete torch checkpoint (a pickle that ends early or is damaged: "
                                 f"{exc}): download or copy it again")
    refused = sorted({n for n in names if not _weights_only_accepts(n, allowed, opaque)})
    if refused:
        return CheckpointRefused(
            f"{path}: torch's legacy (pre-1.6) format whose pickle names {', '.join(refused[:3])}"
            f"{f' and {len(refused) - 3} more' if len(refused) > 3 else ''}, which torch.load(weights_only=True) "
            f"does not accept: save its state dict again with torch.save or safetensors")
    return None


def _check_readable(path: Path, allowed: list, mmap: bool, opaque: bool) -> None:
    """Refuse, before ``torch.load``, what it would refuse or (``mmap``) cannot map: a pickle
    from the first byte that is not torch's legacy format or names globals ``weights_only``
    refuses (:func:`pickle_refusal`) and a zip archive without its central directory (a
    truncated download) as :class:`WeightsError`; with ``mmap``, the legacy format as
    :class:`UnmappableCheckpoint`."""
    import zipfile

    with open(path, "rb") as f:
        head = f.read(4)
    if head.startswith(b"PK") and not zipfile.is_zipfile(path):
        raise CheckpointDamaged(f"{path}: not a complete torch checkpoint (a zip archive without its central "
                                f"directory): the file is truncated or damaged: download or copy it again")
    if head[:1] == b"\x80":
        problem = pickle_problem(path, allowed, opaque)
        if problem is not None:
            raise problem
        if mmap:
            raise UnmappableCheckpoint(f"{path}: in torch's legacy (pre-1.6) format, read whole when the run loads "
                                       f"it: names and shapes are compared then")


def _torch_load(path: Path, allowed: list, mmap: bool, opaque: bool = False) -> Any:
    _check_readable(path, allowed, mmap, opaque)
    with torch.serialization.safe_globals(allowed):
        return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)


def _safetensors_on_meta(path: Path) -> dict[str, torch.Tensor]:
    """A safetensors file's tensors as ``meta`` tensors of their names, dtypes and shapes, from
    its header alone (``safe_open`` checks that the header's offsets cover the file)."""
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        return {k: torch.empty(f.get_slice(k).get_shape(), dtype=_SAFETENSORS_TORCH[f.get_slice(k).get_dtype()],
                               device="meta") for k in f.keys()}


_SAFETENSORS_TORCH = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                      "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
                      "BOOL": torch.bool}


def read_state_dict(path: Path, key: Optional[str] = None, mmap: bool = False) -> dict[str, torch.Tensor]:
    """The tensors of a checkpoint file. ``.safetensors`` files are read with safetensors;
    anything else with ``torch.load(weights_only=True)``, then ``checkpoint[key]`` when the file
    holds a dict with that key (``"model"`` for MAE/Painter, ``"state_dict"`` for Lightning).
    ``mmap``: the tensors map the file instead of reading it (their names and shapes cost only
    the archive's index and pickle; a safetensors file gives ``meta`` tensors from its header:
    what ``--check`` compares)."""
    try:
        if path.suffix == ".safetensors" and mmap:
            state: Any = _safetensors_on_meta(path)
        elif path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(path), device="cpu")
        else:
            state = _torch_load(path, SAFE_GLOBALS, mmap)
    except WeightsError:
        raise
    except Exception as exc:  # pickles with code, truncated files, wrong formats
        raise WeightsError(f"{path}: cannot read the checkpoint with safetensors or torch.load(weights_only=True) "
                           f"({type(exc).__name__}: {exc}); if it pickles objects, re-save its state dict "
                           f"with safetensors") from exc
    if key is not None and isinstance(state, dict) and key in state and isinstance(state[key], dict):
        state = state[key]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise WeightsError(f"{path}: expected a state dict of tensors{f' (or a dict with {key!r})' if key else ''}")
    return state


_UNSUPPORTED_GLOBAL = re.compile(r"Unsupported global: GLOBAL (\S+) was not an allowed global")
# modules whose functions are code, never data: a checkpoint naming one is refused, not read
# (stubs would not run them either: the refusal says the file is not what it claims)
_CODE_MODULES = {"os", "posix", "nt", "sys", "subprocess", "shutil", "socket", "importlib", "runpy", "pickle",
                 "builtins", "code", "codeop", "pty", "ctypes", "marshal", "webbrowser", "multiprocessing", "signal"}


class OpaqueObject:
    """Stands in for any object a training checkpoint pickles beside its tensors (Lightning
    callbacks, OmegaConf configs, optimiser classes): it is built from the pickled arguments and
    state as plain data; no class of the checkpoint is imported and no code of it runs."""

    def __new__(cls, *args: Any, **kwargs: Any) -> "OpaqueObject":
        return object.__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs

    def __setstate__(self, state: Any) -> None:
        self.state = state


def read_training_checkpoint(path: Path, key: Optional[str] = None, mmap: bool = False) -> dict[str, torch.Tensor]:
    """The tensors of a training checkpoint that also pickles objects (taming-transformers'
    Lightning ``last.ckpt``): read with ``torch.load(weights_only=True)``, each class it names
    replaced by an :class:`OpaqueObject` (never imported, never run); a checkpoint naming a
    function of a code module (``os.system``, ``builtins.eval``, ...) is refused. ``mmap`` as in
    :func:`read_state_dict`."""
    stubs: dict[str, type] = {}
    for _ in range(256):
        allowed = SAFE_GLOBALS + [(cls, name) for name, cls in stubs.items()]
        try:
            state: Any = _torch_load(path, allowed, mmap, opaque=True)
            break
        except WeightsError:
            raise
        except Exception as exc:
            found = _UNSUPPORTED_GLOBAL.search(str(exc))
            if found is None or found.group(1) in stubs:
                raise WeightsError(f"{path}: cannot read the checkpoint's tensors ({type(exc).__name__}: "
                                   f"{str(exc)[:300]})") from exc
            name = found.group(1)
            if "." not in name or name.split(".")[0] in _CODE_MODULES:
                raise WeightsError(f"{path}: refused: the checkpoint calls {name} when unpickled (code, not "
                                   f"data); use the published file") from None
            stubs[name] = type(name.rsplit(".", 1)[-1], (OpaqueObject,), {"__module__": "icl.opaque"})
    else:
        raise WeightsError(f"{path}: names more than 256 classes; not a model checkpoint")
    if key is not None and isinstance(state, dict) and isinstance(state.get(key), dict):
        state = state[key]
    if not isinstance(state, dict):
        raise WeightsError(f"{path}: expected a state dict{f' (or a dict with {key!r})' if key else ''}")
    tensors = {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
    if not tensors:
        raise WeightsError(f"{path}: no tensors{f' under {key!r}' if key else ''}")
    return tensors


def load_module(module: nn.Module, state: dict[str, torch.Tensor], path: Path, what: str,
                ignore: tuple[str, ...] = ()) -> None:
    """Load ``state`` into ``module`` strictly (keys starting with an ``ignore`` prefix are
    dropped); a mismatch raises :class:`WeightsError` naming the file and the first keys."""
    state = {k: v for k, v in state.items() if not k.startswith(ignore)} if ignore else state
    why = state_mismatch(module, state, path, what)
    if why is not None:
        raise WeightsError(why)
    module.load_state_dict(state, strict=True)


def state_mismatch(module: nn.Module, state: dict[str, torch.Tensor], path: Path, what: str) -> Optional[str]:
    """Why ``state`` does not load strictly into ``module`` (its missing, unexpected and
    wrongly shaped names), or None. Names and shapes only: ``module`` may live on ``meta`` and
    ``state`` map its file (``--check``, :func:`icl.run.planning.check.inspect_weights`)."""
    own = module.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    wrong = [f"{k} {tuple(state[k].shape)} != {tuple(v.shape)}" for k, v in own.items()
             if k in state and tuple(state[k].shape) != tuple(v.shape)]
    if not (missing or unexpected or wrong):
        return None
    parts = []
    for label, keys in (("missing", missing), ("unexpected", unexpected), ("wrong shape", wrong)):
        if keys:
            parts.append(f"{len(keys)} {label} ({', '.join(keys[:4])}{', ...' if len(keys) > 4 else ''})")
    return f"{path}: not a {what} checkpoint for this configuration: " + "; ".join(parts)


def read_json(path: Path) -> dict[str, Any]:
    """A ``config.json`` as a dict, with a clear error when it is missing or malformed."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise WeightsError(f"{path}: missing (the folder must hold the model's config.json)") from None
    except (OSError, ValueError) as exc:
        raise WeightsError(f"{path}: cannot read JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise WeightsError(f"{path}: expected a JSON object")
    return data


def config_fields(cls: Any, overrides: dict[str, Any], model: str) -> dict[str, Any]:
    """``overrides`` for the config dataclass ``cls``, checked against its field names (a
    ValueError names the unknown ones), lists read as tuples (JSON has no tuples)."""
    names = {f.name for f in dataclasses.fields(cls)}
    bad = sorted(set(overrides) - names)
    if bad:
        raise ValueError(f"{model}: unknown config fields {bad}; known: {sorted(names)}")
    return {k: tuple(v) if isinstance(v, list) else v for k, v in overrides.items()}


def check_loading_info(info: dict[str, Any], folder: Path, what: str, ignore: tuple[str, ...] = ()) -> None:
    """Refuse a transformers/diffusers load whose ``output_loading_info`` reports missing,
    unexpected or mismatched keys (those would be left random or dropped): a
    :class:`WeightsError` naming the folder and the first keys. ``ignore`` lists substrings of
    unexpected keys the reference code drops too (e.g. InternLM's saved ``rotary_emb.inv_freq``)."""
    missing = sorted(info.get("missing_keys") or ())
    unexpected = sorted(k for k in info.get("unexpected_keys") or () if not any(s in k for s in ignore))
    wrong = sorted(f"{m[0]} {tuple(m[1])} != {tuple(m[2])}" if isinstance(m, tuple) and len(m) == 3 else str(m)
                   for m in info.get("mismatched_keys") or ())
    errors = [str(e) for e in info.get("error_msgs") or ()]
    parts = []
    for label, keys in (("missing", missing), ("unexpected", unexpected), ("wrong shape", wrong), ("errors", errors)):
        if keys:
            parts.append(f"{len(keys)} {label} ({', '.join(keys[:4])}{', ...' if len(keys) > 4 else ''})")
    if parts:
        raise WeightsError(f"{folder}: not a {what} checkpoint for its config.json: " + "; ".join(parts))


def load_pretrained(cls: Any, folder: Path, what: str, dtype: Any = None, ignore: tuple[str, ...] = (),
                    **kwargs: Any) -> Any:
    """``cls.from_pretrained(folder, ...)`` strictly (:func:`check_loading_info`), local files
    only, read at ``dtype`` (never an fp32 copy first; transformers spells it ``dtype``,
    diffusers ``torch_dtype``) and without a random initialisation pass
    (``low_cpu_mem_usage``); any failure inside (a truncated safetensors file, a bad config) is
    a :class:`WeightsError` naming the folder."""
    kwargs.setdefault("low_cpu_mem_usage", True)
    kwargs.setdefault("local_files_only", True)
    is_transformers = getattr(cls, "__module__", "").startswith("transformers")
    if dtype is not None:
        kwargs["dtype" if is_transformers else "torch_dtype"] = dtype
    if is_transformers:
        kwargs.setdefault("ignore_mismatched_sizes", True)  # reported by loading_info, refused below
    try:
        model, info = cls.from_pretrained(str(folder), output_loading_info=True, **kwargs)
    except WeightsError:
        raise
    except Exception as exc:  # safetensors, OSError, JSON, shape errors: name the folder
        files = ", ".join(sorted(p.name for p in folder.iterdir() if p.is_file())[:6]) if folder.is_dir() else ""
        raise WeightsError(f"{folder}: cannot load the {what} ({type(exc).__name__}: {str(exc)[:300]}); "
                           f"files: {files or 'none'}") from exc
    check_loading_info(info, folder, what, ignore)
    return model


_SAFETENSORS_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                       "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
                       "U8": torch.uint8, "BOOL": torch.bool}


def _checkpoint_files(folder: Path) -> list[Path]:
    """The weight files of a ``save_pretrained`` folder: one file or the shards its index names."""
    for single, index in (("model.safetensors", "model.safetensors.index.json"),
                          ("pytorch_model.bin", "pytorch_model.bin.index.json")):
        if (folder / single).is_file():
            return [folder / single]
        if (folder / index).is_file():
            weight_map = read_json(folder / index).get("weight_map")
            if not isinstance(weight_map, dict):
                raise WeightsError(f"{folder / index}: no weight_map")
            files = [folder / name for name in dict.fromkeys(weight_map.values())]
            missing = [f.name for f in files if not f.is_file()]
            if missing:
                raise WeightsError(f"{folder / index}: shard(s) {', '.join(missing[:3])} missing")
            return files
    raise WeightsError(f"{folder}: no model.safetensors, pytorch_model.bin or their .index.json")


def _read_safetensors(path: Path, dtype: torch.dtype, out: dict[str, torch.Tensor]) -> None:
    """Each tensor of ``path`` read with plain file reads (no memory map, whose file pages would
    count against the process beside the converted copy) and cast to ``dtype`` one at a time."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        if n <= 0 or 8 + n > size:
            raise WeightsError(f"{path}: not a safetensors file (header length {n}, file {size} bytes)")
        try:
            header = json.loads(f.read(n))
        except ValueError as exc:
            raise WeightsError(f"{path}: unreadable safetensors header ({exc})") from exc
        for name, info in sorted(((k, v) for k, v in header.items() if k != "__metadata__"),
                                 key=lambda kv: kv[1]["data_offsets"][0]):
            src = _SAFETENSORS_DTYPES.get(info.get("dtype"))
            start, end = info["data_offsets"]
            if src is None:
                raise WeightsError(f"{path}: tensor {name}: dtype {info.get('dtype')!r} not supported")
            if 8 + n + end > size:
                raise WeightsError(f"{path}: truncated: tensor {name} ends at byte {8 + n + end}, the file has {size}")
            f.seek(8 + n + start)
            buf = bytearray(end - start)
            f.readinto(buf)
            t = torch.frombuffer(buf, dtype=src) if buf else torch.empty(0, dtype=src)
            t = t.reshape(info["shape"])
            out[name] = t.to(dtype) if t.is_floating_point() else t


def read_pretrained_tensors(folder: Path, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Every tensor of a ``save_pretrained`` folder, floating ones cast to ``dtype`` tensor by
    tensor: the peak host memory is the result plus one tensor (safetensors) or one shard
    (``pytorch_model*.bin``, read with ``torch.load(weights_only=True)``)."""
    out: dict[str, torch.Tensor] = {}
    for path in _checkpoint_files(folder):
        if path.suffix == ".safetensors":
            _read_safetensors(path, dtype, out)
        else:
            shard = read_state_dict(path)
            for name in list(shard):
                t = shard.pop(name)
                out[name] = t.to(dtype) if t.is_floating_point() else t
    return out


def load_streamed(cls: Any, config: Any, folder: Path, what: str, dtype: torch.dtype,
                  ignore: tuple[str, ...] = ()) -> Any:
    """A transformers model of ``cls`` built without weights (parameters on the meta device)
    and given the folder's tensors at ``dtype`` (:func:`read_pretrained_tensors`), strictly:
    missing, unexpected (but ``ignore`` substrings) and mis-shaped keys raise
    :class:`WeightsError` naming the folder (as :func:`check_loading_info`)."""
    from accelerate import init_empty_weights  # type: ignore[import-untyped]  # no type information shipped

    with init_empty_weights():
        model = cls(config)
    tied = set(getattr(model, "_tied_weights_keys", None) or ()) if getattr(config, "tie_word_embeddings", False) \
        else set()
    state = read_pretrained_tensors(folder, dtype)
    own = model.state_dict()
    missing = {k for k in own if k not in state and k not in tied}
    unexpected = {k for k in state if k not in own}
    wrong = {(k, tuple(state[k].shape), tuple(v.shape)) for k, v in own.items()
             if k in state and tuple(state[k].shape) != tuple(v.shape)}
    check_loading_info({"missing_keys": missing, "unexpected_keys": unexpected, "mismatched_keys": wrong},
                       folder, what, ignore)
    model.load_state_dict({k: v for k, v in state.items() if k in own}, strict=False, assign=True)
    if tied:
        model.tie_weights()
    return model.eval()
