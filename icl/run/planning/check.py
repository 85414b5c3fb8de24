"""``--check``: everything a run decides before its first model call, and nothing that needs a GPU or
a forward pass. Every problem is listed at once, each with its fix; one table is printed,
``check.json`` is written into the output folder (the only file written: the store is opened
read-only when it exists, the output folder's lock is probed, never taken; ``--calibrate`` writes
its scratch store into a temporary folder it removes) and the exit status
is 0 (runnable) or 2 (problems). ``--calibrate``'s scratch folders left by a check killed before
removing them are removed by the next check (:func:`icl.run.planning.check_cost.remove_stale_scratch`).

What it looks at, through the run's own planning (:mod:`icl.run.runner`):

1. the plan: benchmark x tasks x shots x models, per (task, model) the planned scores (item x
   judge), those already stored for that model identity (a resume) and those remaining
   (:func:`icl.run.planning.plan.model_work`, the computation the engine runs);
2. data: the benchmark's own loading (``items()``, ``data_failures()``), every failure listed;
3. models and judges: instantiated as the run does (weights resolved: local paths exist, ``hf:``
   references from the Hugging Face cache only, a reference not there is reported as needing a
   download), configurations and processors read (``check_loadable``), judges able to judge;
4. checkpoints: the safetensors headers (never a tensor) of every weight file: a truncated file
   fails; every network the adapter builds from a configuration (``Adapter.architectures``: the
   transformers and diffusers families, a diffusers pipeline's networks from its
   ``model_index.json``) is built on the ``meta`` device and its parameter names and shapes
   compared with the checkpoint's, so a checkpoint of another architecture fails;
5. resources: parameters and bytes at the chosen precision per model, the disk the outputs need
   (:func:`disk_estimate`) against the free space (a shortfall is a warning, as in the run:
   :func:`disk_warning`), the output folder's lock and its earlier runs;
6. cost (:mod:`icl.run.planning.check_cost`): per model, its load time plus the time per item times the
   items remaining, from the compute the store holds for that model identity, else (``--calibrate
   N``) from its first N remaining items run for real by the run's engine into a scratch store in
   a temporary folder (removed; the user's store and output folder get nothing), else unknown;
   each estimate names its basis. For HTTP models (``openai``, ``openai-images``) the requests,
   estimated input tokens, images sent, output tokens at most and images to generate of the
   remaining items, and their price from the ``price_in`` / ``price_out`` / ``price_image``
   model arguments; no API is called (except by ``--calibrate``).
7. context: per (task, shots) and model, the longest chat prompt tokenised as the run tokenises
   it, against the model's context: the cells that will overflow (a recorded outcome, so a
   warning) (:mod:`icl.run.planning.check_context`);
8. refusals: per (task, shots) and model, the planned requests the model's one refusal rule
   (``Adapter.would_refuse``, the rule its ``predict`` and the run's engine apply) refuses, and
   why: recorded as not applicable by the run, so listed as a warning (:func:`refusal_check`).

A real run performs the checkpoint checks (4) too, after the models are instantiated and before
any is loaded (:func:`checkpoint_problems`), for the models it will load (:func:`to_load`: those
with work left), and plans its work with the same function, so what ``--check`` reports is what
the run does.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, TextIO

from icl.models.errors import CheckpointDamaged
from icl.run.planning.check_parts import (CACHE_DAMAGED, CANNOT_SERVE, CHECKPOINT_DAMAGED, CHECKPOINT_REFUSED,
                                          MISSING_PACKAGE, NEEDS_DOWNLOAD, Found, Problem, hub_offline, kind_of,
                                          missing_package_message, package_fix, package_of,
                                          text_table)
from icl.run.planning.config import RunConfig, parse_models
from icl.run.errors import ConfigError

CHECK_FILE = "check.json"
EXIT_OK, EXIT_PROBLEMS = 0, 2
BYTES_PER_PARAM = {"fp32": 4, "fp16": 2, "bf16": 2}
# The disk estimate (:func:`disk_estimate`). An answer's bytes when neither the store nor its
# request tells (an image generated at the model's own size, a request that cannot be built):
IMAGE_ANSWER_BYTES, TEXT_ANSWER_BYTES = 256 * 1024, 2 * 1024
TEXT_BYTES_PER_TOKEN = 8  # a generated text's most bytes per token (UTF-8 of a long token)
SAMPLED_REQUESTS = 16  # requests built (spread over the items remaining) to size a model's answers
STORE_ROW_BYTES = 2 * 1024  # the store's rows of one score besides the answer (links, score, indexes)
SAMPLE_LINE_BYTES = 2 * 1024  # a samples.jsonl line when the output folder has none yet
# reports (tables, report.md / .html, plots, results.json, gallery) when the folder has none yet
REPORT_BASE_BYTES, REPORT_BYTES_PER_SCORE, REPORT_MAX_BYTES = 64 * 1024, 24 * 1024, 64 * 1024 * 1024
# the base class of the families that build their own torch network from a torch.save checkpoint,
# named (not imported: importing it imports torch)
OWN_NETWORK_ADAPTER = "icl.models.vicl._torch.CheckpointNetworkAdapter"

FreeSpace = Callable[[Path], int]


@dataclass
class Checkpoint:
    """What the safetensors headers of a model's weights say."""

    files: int = 0
    params: int = 0
    stored_bytes: int = 0
    dtypes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)  # per problem, what it is (icl.run.planning.check_parts.kind_of)
    notes: list[str] = field(default_factory=list)

    def problem(self, message: str, cause: Optional[BaseException] = None) -> None:
        """A problem, and what it is from the error that said it (``cause``)."""
        self.problems.append(message)
        self.kinds.append(kind_of(cause))


def disk_free(path: Path) -> int:
    """Free bytes on the filesystem that holds ``path`` (or, while it does not exist, its nearest
    existing parent)."""
    p = Path(os.path.abspath(path))
    while not p.exists() and p.parent != p:
        p = p.parent
    return shutil.disk_usage(p).free


# --- checkpoints -------------------------------------------------------------------------------
def _safetensors_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path] if path.suffix == ".safetensors" else []
    if path.is_dir():
        from icl.models.hub import IGNORE_PATTERNS

        ignored = [re.compile(p.replace(".", r"\.").replace("*", ".*")) for p in IGNORE_PATTERNS]
        return sorted(f for f in path.rglob("*.safetensors") if not any(i.fullmatch(f.name) for i in ignored))
    return []


def read_header(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """``{name: (dtype, shape)}`` of a safetensors file, from its header only (``safe_open``
    checks that the header's offsets cover the file: a truncated file raises ValueError)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), "np") as f:
            out = {}
            for key in f.keys():
                s = f.get_slice(key)
                out[key] = (str(s.get_dtype()), tuple(int(d) for d in s.get_shape()))
            return out
    except Exception as exc:  # SafetensorError (truncated, not a safetensors file), OSError
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointDamaged(f"{path}: not a complete safetensors file ({first}); the file is truncated or "
                                f"damaged: download or copy it again") from None


_SAFETENSORS_DTYPES = {"float32": "F32", "float16": "F16", "bfloat16": "BF16", "float64": "F64", "int64": "I64",
                       "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL"}


def tensor_layout(state: dict[str, Any]) -> dict[str, tuple[str, tuple[int, ...]]]:
    """``{name: (dtype, shape)}`` of a state dict, dtypes named as safetensors headers name them."""
    out = {}
    for key, value in state.items():
        dtype = str(value.dtype).removeprefix("torch.")
        out[key] = (_SAFETENSORS_DTYPES.get(dtype, dtype), tuple(int(d) for d in value.shape))
    return out


def read_pickle_header(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """``{name: (dtype, shape)}`` of a ``torch.save`` state dict (``pytorch_model.bin``) without
    reading its tensors: ``torch.load(mmap=True, weights_only=True)`` maps the file and reads
    only its index and pickle. Raises :class:`icl.models.vicl._load.UnmappableCheckpoint` for the
    legacy format and ``WeightsError`` for a truncated or unreadable file."""
    from icl.models.vicl._load import read_state_dict

    return tensor_layout(read_state_dict(path, mmap=True))


def build_on_meta(arch: Any) -> Any:
    """``arch`` (:class:`icl.models.base.Architecture`) built from its configuration on the
    ``meta`` device: every parameter has its name and shape, none has memory or values."""
    import torch

    cls, folder = arch.cls, Path(arch.folder)
    with torch.device("meta"):
        if cls.__module__.startswith("diffusers") or hasattr(cls, "load_config"):  # a diffusers ModelMixin
            return cls.from_config(cls.load_config(str(folder), local_files_only=True))
        from transformers import AutoConfig

        config = arch.config if arch.config is not None else AutoConfig.from_pretrained(
            folder, trust_remote_code=False, local_files_only=True)
        if cls.__name__.startswith("Auto"):
            return cls.from_config(config)
        return cls._from_config(config)


def _key_renamer(model: Any) -> Callable[[str], tuple[str, bool]]:
    """How transformers renames a checkpoint key while loading ``model`` (its conversion mapping:
    legacy layouts); returns (name, converted: a tensor transform beyond a rename applies)."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import WeightRenaming

        transforms = get_model_conversion_mapping(model)
    except Exception:  # another transformers version: names compared as they are
        return lambda key: (key, False)

    def rename(key: str) -> tuple[str, bool]:
        converted = False
        for t in transforms:
            try:
                new, pattern = t.rename_source_key(key)
            except Exception:
                continue
            if pattern is not None:
                converted = converted or not isinstance(t, WeightRenaming)
                key = new
        return key, converted

    return rename


def _forgiven(model: Any, attribute: str) -> list[re.Pattern]:
    """Key patterns a transformers model declares it may lack or not use (tied weights, ignored keys)."""
    out = []
    for module in model.modules():
        value = getattr(module, attribute, None) or ()
        for p in (value.keys() if isinstance(value, dict) else value):
            try:
                out.append(re.compile(str(p)))
            except re.error:
                out.append(re.compile(re.escape(str(p))))
    return out


def compare_architecture(arch: Any, present: dict[str, tuple[str, tuple[int, ...]]]) -> tuple[list[str], list[str]]:
    """Build ``arch`` on the meta device (:func:`build_on_meta`: no memory, no weights) and compare
    its parameter names and shapes with the checkpoint's (``present``, from the safetensors
    headers), after the renames the library applies while loading (transformers' conversion
    mapping, diffusers' deprecated attention names); returns (problems, notes)."""
    folder = Path(arch.folder)
    model = build_on_meta(arch)
    config = getattr(model, "config", None)
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    rename = _key_renamer(model)
    prefix = f"{model.base_model_prefix}." if getattr(model, "base_model_prefix", "") else ""
    found: dict[str, tuple[int, ...]] = {}
    converted = 0
    fix = getattr(model, "_fix_state_dict_keys_on_load", None)  # diffusers: query/key/value -> to_q/to_k/to_v
    if callable(fix):
        present = dict(fix(dict(present)) or present)
    for key, (_, shape) in present.items():
        name, changed = rename(key)
        if changed:
            converted += 1
            continue
        if name not in expected and prefix and prefix + name in expected:
            name = prefix + name  # a base model's checkpoint under a model with a head
        found[name] = shape
    tied = _forgiven(model, "_tied_weights_keys") + _forgiven(model, "_keys_to_ignore_on_load_missing")
    ignored = _forgiven(model, "_keys_to_ignore_on_load_unexpected")
    missing = [k for k in expected if k not in found and not any(p.search(k) for p in tied)]
    unexpected = [k for k in found if k not in expected and not any(p.search(k) for p in ignored)]
    shapes = [f"{k}: checkpoint {list(found[k])}, architecture {list(expected[k])}"
              for k in expected if k in found and found[k] != expected[k]]
    problems, notes = [], []
    if converted and (missing or shapes):
        notes.append(f"{converted} checkpoint tensors are converted while loading (not compared)")
        missing = []
    if missing or shapes:
        parts = []
        if missing:
            parts.append(f"{len(missing)} of its {len(expected)} parameters missing (first: {missing[0]})")
        if shapes:
            parts.append(f"{len(shapes)} shapes differ (first: {shapes[0]})")
        if unexpected:
            parts.append(f"{len(unexpected)} tensors it does not have (first: {unexpected[0]})")
        kind = getattr(config, "model_type", None) or getattr(config, "_class_name", None) or "?"
        problems.append(f"{folder}: the checkpoint does not fit the architecture its config.json declares "
                        f"({type(model).__name__}, {kind}): {'; '.join(parts)}")
    elif unexpected:
        notes.append(f"{len(unexpected)} checkpoint tensors unused by {type(model).__name__} (first: "
                     f"{unexpected[0]})")
    return problems, notes


def inspect_weights(adapter: Any) -> Checkpoint:
    """The safetensors headers of every weight file ``adapter`` reports, and every network it
    builds against its checkpoint, nothing read but headers, indexes and pickles: the transformers
    and diffusers networks of ``Adapter.architectures`` (:func:`compare_architecture`; a folder's
    ``*.bin`` mapped when it has no safetensors) and a family's own torch network
    (``CheckpointNetworkAdapter``, :func:`_own_network`)."""
    out = Checkpoint()
    try:
        paths = [Path(p) for p in adapter.weight_files()]
    except Exception as exc:  # resolved before by make_model: rarely reached
        out.problem(str(exc), exc)
        return out
    headers: dict[Path, dict[str, tuple[str, tuple[int, ...]]]] = {}
    for path in paths:
        for f in _safetensors_files(path):
            try:
                headers[f] = read_header(f)
            except CheckpointDamaged as exc:
                out.problem(str(exc), exc)
                continue
            out.files += 1
            out.stored_bytes += f.stat().st_size
            for dtype, shape in headers[f].values():
                out.params += math.prod(shape)
                if dtype not in out.dtypes:
                    out.dtypes.append(dtype)
    if out.problems:
        return out
    try:
        architectures = list(adapter.architectures())
    except Exception as exc:  # an index or configuration the adapter cannot read
        out.problem(str(exc), exc)
        return out
    for arch in architectures:
        folder = Path(arch.folder)
        present = {k: v for f, h in headers.items() if f.parent == folder for k, v in h.items()}
        if not present:
            for f in _safetensors_files(folder):  # a folder not among weight_files() (a pipeline's part)
                try:
                    present.update(read_header(f))
                except CheckpointDamaged as exc:
                    out.problem(str(exc), exc)
        if not present:
            pickles = sorted(folder.glob("*.bin")) if folder.is_dir() else []
            if not pickles:
                out.problem(f"{folder}: no weights (*.safetensors or *.bin) beside config.json")
                continue
            # torch.save files: mapped, only their index and pickle read
            mapped = _mapped(lambda: {k: v for f in pickles for k, v in read_pickle_header(f).items()}, out)
            if mapped is None:
                continue
            present.update(mapped)
        try:
            problems, notes = compare_architecture(arch, present)
        except Exception as exc:  # the configuration does not build an architecture
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            problems, notes = [f"{folder}: config.json does not build an architecture ({type(exc).__name__}: "
                               f"{first})"], []
        for message in problems:
            out.problem(message)
        out.notes += notes
    _own_network(adapter, out)
    return out


def _mapped(read: Callable[[], Any], out: Checkpoint) -> Any:
    """``read()`` of mapped ``torch.save`` files, or None with why in ``out``: the legacy format
    (cannot be mapped: a note, compared when the run loads it) or an unreadable or truncated
    file (a problem)."""
    from icl.models.vicl._load import UnmappableCheckpoint
    from icl.models.weights import WeightsError

    try:
        return read()
    except UnmappableCheckpoint as exc:
        out.notes.append(str(exc))
    except WeightsError as exc:
        out.problem(str(exc), exc)
    return None


def _own_network(adapter: Any, out: Checkpoint) -> None:
    """A family that builds its own torch network (``CheckpointNetworkAdapter``: Painter,
    MAE-VQGAN) from a ``torch.save`` checkpoint: the network built on ``meta`` against the mapped
    checkpoint, by the rule its loading applies (``_load.state_mismatch``); the parameters and
    dtypes counted from it when no safetensors file did. An adapter whose ``build`` is its own
    (a subclass with random weights, a plugin loading its own way) loads by another rule:
    nothing is compared. Which adapters these are is read from their classes' names, so a model
    that loads no such checkpoint (the built-in baselines) costs no torch import."""
    if not any(f"{c.__module__}.{c.__qualname__}" == OWN_NETWORK_ADAPTER for c in type(adapter).__mro__):
        return
    from icl.models.vicl._torch import CheckpointNetworkAdapter

    if not isinstance(adapter, CheckpointNetworkAdapter) or type(adapter).build is not CheckpointNetworkAdapter.build:
        return
    import torch

    from icl.models.vicl._load import state_mismatch

    try:
        with torch.device("meta"):
            net = adapter.network()
    except Exception as exc:  # a configuration the network cannot be built from
        out.problem(f"{adapter.name}: its configuration does not build the network ({type(exc).__name__}: "
                    f"{exc})")
        return
    try:
        found = _mapped(lambda: adapter.checkpoint_state(mmap=True), out)
    except Exception as exc:  # not a weights error: the family's reading code failed (named, not raised)
        out.problem(f"{adapter.name}: its checkpoint cannot be read ({type(exc).__name__}: {exc})")
        return
    if found is None:
        return
    path, state = found
    ignore = tuple(getattr(adapter, "checkpoint_ignore", ()))
    state = {k: v for k, v in state.items() if not k.startswith(ignore)} if ignore else state
    if not out.params:
        for dtype, shape in tensor_layout(state).values():
            out.params += math.prod(shape)
            if dtype not in out.dtypes:
                out.dtypes.append(dtype)
        files = [Path(f) for f in adapter.weight_files()]
        out.files += sum(1 for f in files if f.is_file() and f.suffix != ".safetensors")
        out.stored_bytes += sum(f.stat().st_size for f in files if f.is_file() and f.suffix != ".safetensors")
    why = state_mismatch(net, state, path, getattr(adapter, "checkpoint_label", "") or adapter.name)
    if why is not None:
        out.problem(why)


# --- memory --------------------------------------------------------------------------------------
def memory_estimate(adapter: Any, weight_bytes: Optional[int], bytes_per_value: int) -> dict[str, Any]:
    """The estimated peak device memory of ``adapter`` per batch size (docs/runs.md "Before a long
    run"): ``peak(B) = W + B x A``, W the weights' bytes at the chosen precision and A one
    request's activations, as the adapter's family estimates them from its configuration
    (:meth:`icl.models.base.Adapter.activation_memory`; the formulas are each family's, shared
    parts in :mod:`icl.models.memory`). A family without an estimate, or whose configuration
    cannot be read, leaves A unknown and the estimate is W alone (``basis`` says which)."""
    out: dict[str, Any] = dict(weights_bytes=weight_bytes, activation_bytes_per_request=None, tokens=None,
                               basis="weights only (activations not estimated: none for this family, or its "
                                     "configuration cannot be read)")
    hook = getattr(adapter, "activation_memory", None)
    try:
        activations = hook(bytes_per_value) if callable(hook) else None
    except Exception as exc:  # an estimate is advice: a family's bug must not stop the check
        activations = None
        out["basis"] = f"weights only (activation estimate failed: {type(exc).__name__}: {exc})"
    if activations is not None:
        out.update(activation_bytes_per_request=int(activations.bytes_per_request), tokens=activations.tokens,
                   basis=f"weights + batch x activations ({activations.basis})")
    batch = getattr(adapter, "batch_size", 1)
    batch = batch if isinstance(batch, int) and batch > 0 else 1
    per_call = getattr(adapter, "most_per_call", None)  # a pipeline that takes fewer requests a call
    if isinstance(per_call, int) and per_call > 0:
        batch = min(batch, per_call)
    sizes = sorted({1, batch})
    out["batch_size"] = sizes[-1]
    out["peak_bytes"] = {str(b): peak_bytes(out, b) for b in sizes}
    return out


def peak_bytes(estimate: dict[str, Any], batch: int) -> Optional[int]:
    """``W + batch x A`` of a :func:`memory_estimate` (A taken as 0 when unknown)."""
    if estimate.get("weights_bytes") is None:
        return None
    return int(estimate["weights_bytes"] + batch * (estimate.get("activation_bytes_per_request") or 0))


def free_device_memory(device: str) -> Optional[dict[str, int]]:
    """``{"free_bytes", "total_bytes"}`` of the CUDA ``device`` (``torch.cuda.mem_get_info``) when
    CUDA is visible, else None."""
    if not device.startswith("cuda"):
        return None
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        free, total = torch.cuda.mem_get_info(torch.device(device))
        return dict(free_bytes=int(free), total_bytes=int(total))
    except Exception:  # a driver that does not answer: not reported
        return None


def checkpoint_problems(models: Sequence[Any]) -> list[tuple[str, str]]:
    """(where, message) of every model's and judge's checkpoint (:func:`inspect_weights`); the
    run calls this before loading any model, ``--check`` lists the same."""
    out = []
    for m in models:
        for message in inspect_weights(m.adapter).problems:
            out.append((f"model {m.label}", message))
    return out


def pending_work(store: Any, bench: Any, items: Sequence[Any], models: Sequence[Any], judge_ids: Sequence[str],
                 stored_ids: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """Per model label its :class:`icl.run.planning.plan.ModelWork` against ``store`` (a read-only
    :class:`icl.store.Store`, or None: nothing stored), each model's scores looked up under
    ``stored_ids.get(model_id, model_id)``: what ``--check`` reports and what the run checks
    the checkpoints of (a model with nothing left to do is never loaded)."""
    from icl.run.planning.plan import model_work

    out = {}
    for m in models:
        mid = (stored_ids or {}).get(m.model_id, m.model_id)
        def done(judge_id: str, mid: str = mid) -> set[str]:
            if store is None:
                return set()
            return store.done(bench.name, bench.protocol, mid, judge_id, bench.scorer_version)

        out[m.label] = model_work(bench, items, m.serves, judge_ids, done)
    return out


def png_upper_bound(height: int, width: int, channels: int = 3) -> int:
    """The most bytes a PNG of ``height x width x channels`` 8-bit pixels takes: its rows stored
    uncompressed (a filter byte each) in deflate's stored blocks (5 bytes per 65,535), in IDAT
    chunks of 8 KiB (12 bytes each), plus the signature, IHDR, IEND and zlib's 6 bytes."""
    raw = height * (width * channels + 1)
    return raw + 5 * math.ceil(raw / 65535) + 12 * math.ceil(raw / 8192) + 8 + 25 + 12 + 6


def request_answer_bytes(request: Any) -> Optional[int]:
    """The most bytes an answer to ``request`` takes in the store, from what the request asks: a
    chat answer ``max_new_tokens`` x :data:`TEXT_BYTES_PER_TOKEN`; an image (an analogy at the
    larger of its query and target sizes, a generation at its ``size``) as :func:`png_upper_bound`
    of 3 channels; None when the request does not say (a generation without a size)."""
    from icl.models.requests import AnalogyRequest, ChatRequest, GenerationRequest

    if isinstance(request, ChatRequest):
        return int(request.max_new_tokens) * TEXT_BYTES_PER_TOKEN
    if isinstance(request, AnalogyRequest):
        shape = tuple(getattr(request.query, "shape", ())[:2]) or (0, 0)
        h, w = (max(a, b) for a, b in zip(request.target_size, shape))
        return png_upper_bound(int(h), int(w), 3)
    if isinstance(request, GenerationRequest) and request.size:
        return png_upper_bound(int(request.size[0]), int(request.size[1]), 3)
    return None


def answer_bytes(store: Any, bench: Any, model: Any, model_id: str, todo: Sequence[Any]) -> tuple[float, str]:
    """(bytes, basis) of one more answer of ``model``: the mean of its answers the store holds
    under ``model_id``; else the mean of :func:`request_answer_bytes` over up to
    :data:`SAMPLED_REQUESTS` requests spread over its remaining items ``todo``; else
    :data:`IMAGE_ANSWER_BYTES` or :data:`TEXT_ANSWER_BYTES` by what it answers."""
    seen, body = store.answer_bytes(model_id) if store is not None else (0, 0)
    if seen:
        return body / seen, f"stored answers ({seen})"
    step = max(1, len(todo) // SAMPLED_REQUESTS)
    sizes = []
    for item in list(todo)[::step][:SAMPLED_REQUESTS]:
        try:
            size = request_answer_bytes(bench.request(item, model.privileged))
        except Exception:  # the run records an unbuildable request as the item's data failure
            continue
        if size is not None:
            sizes.append(size)
    if sizes:
        return sum(sizes) / len(sizes), f"requests ({len(sizes)} sampled)"
    return float(IMAGE_ANSWER_BYTES if answers_are_images(bench, model) else TEXT_ANSWER_BYTES), "default"


def answers_are_images(bench: Any, model: Any) -> bool:
    """Whether ``model``'s answers to ``bench`` are images (it serves none of its chat requests)."""
    return not any(issubclass(t, _chat()) for t in bench.request_types if model.serves(t))


def _folder_bytes(out: Path) -> tuple[int, Optional[float]]:
    """(bytes of the reports an earlier run left in ``out``, the mean bytes of a line of its
    samples.jsonl over its first MiB, or None): the files a run rewrites, besides the store, the
    per-sample log's images, check.json and the lock."""
    from icl.run.outputs.samples import IMAGES, SAMPLES

    reports, line = 0, None
    if not out.is_dir():
        return 0, None
    skip = {SAMPLES, IMAGES, CHECK_FILE, ".icl.lock"}
    for path in out.iterdir():
        if path.name in skip or path.name.startswith("store.sqlite") or path.is_symlink():
            continue
        try:
            if path.is_file():
                reports += path.stat().st_size
            elif path.is_dir():
                reports += sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())
        except OSError:
            continue
    samples = out / SAMPLES
    try:
        if samples.is_file() and samples.stat().st_size:
            with open(samples, "rb") as f:  # its first MiB: every run start reads this, never the whole log
                head = f.read(1 << 20)
            lines = head.count(b"\n")
            line = (len(head) / lines) if lines else float(samples.stat().st_size)
    except OSError:
        pass
    return reports, line


def disk_estimate(store: Any, bench: Any, out: Path, models: Sequence[Any], works: dict[str, Any],
                  logs: bool, stored_ids: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """The disk a run's outputs need (docs/runs.md "Disk"), the same for ``--check`` and the run:

    - answers: per model, its items remaining x one answer's bytes (:func:`answer_bytes`), twice
      for image answers when the per-sample log (``logs``) keeps a PNG copy under ``samples/``;
    - the store's rows: :data:`STORE_ROW_BYTES` per score to compute (item x judge);
    - ``samples.jsonl`` (``logs``): a line per score to compute, the mean line of the output
      folder's samples.jsonl, else :data:`SAMPLE_LINE_BYTES`;
    - reports, rewritten at the end: those an earlier run left in the output folder, else
      :data:`REPORT_BASE_BYTES` + :data:`REPORT_BYTES_PER_SCORE` per planned score, at most
      :data:`REPORT_MAX_BYTES`.

    Returns check.json's ``disk`` fields: ``needed_bytes``, the parts, each model's answer size
    and its basis. With nothing left to compute, nothing is needed."""
    answers, scores, planned, per_model = 0.0, 0, 0, {}
    for m in models:
        work = works[m.label]
        scores += work.remaining
        planned += work.remaining + work.skipped
        if not work.todo:
            continue
        mid = (stored_ids or {}).get(m.model_id, m.model_id)
        size, basis = answer_bytes(store, bench, m, mid, work.todo)
        copies = 2 if logs and answers_are_images(bench, m) else 1
        answers += len(work.todo) * size * copies
        per_model[m.label] = dict(answer_bytes=int(size), basis=basis, answers=len(work.todo), copies=copies)
    reports, line = _folder_bytes(out)
    if not reports:
        reports = min(REPORT_MAX_BYTES, REPORT_BASE_BYTES + REPORT_BYTES_PER_SCORE * planned)
    parts = dict(answers_bytes=int(answers), store_rows_bytes=STORE_ROW_BYTES * scores,
                 samples_bytes=int((line or SAMPLE_LINE_BYTES) * scores) if logs else 0, reports_bytes=int(reports))
    needed = sum(parts.values()) if scores else 0
    return dict(needed_bytes=needed, **parts, per_model=per_model)


def disk_warning(out: Path, needed: int, free: int, remaining: int) -> Optional[str]:
    """The one disk line of ``--check`` and of the run, both a warning (None when ``needed`` fits
    in ``free``): the need is an estimate, so neither stops for it; a disk that does fill stops
    the run with one line, keeping every result it stored."""
    if needed <= free:
        return None
    return (f"the outputs need about {_size(needed)} ({remaining} scores to compute, the store, samples and "
            f"reports) and {out} has {_size(free)} free; the run goes on and, if the disk fills, stops keeping "
            f"every result it stored ({fix_for('disk')})")


def to_load(config: RunConfig, bench: Any, items: Sequence[Any], models: Sequence[Any],
            judges: Sequence[Any]) -> tuple[list[Any], int, int]:
    """What a run will load and write: the models with work left in the store at
    ``config.store_path`` (read-only) and the judges when any model has; the disk bytes its
    outputs need (:func:`disk_estimate`, as ``--check`` counts them) and the scores remaining."""
    from icl.run.outputs.samples import log_samples
    from icl.store import Store, StoreError

    store = None
    try:
        store = Store(config.store_path, readonly=True) if Path(config.store_path).is_file() else None
    except StoreError:  # the run itself reports it when it opens the store
        pass
    logs = log_samples(config.log_samples, len(items) * len(models))
    try:
        work = pending_work(store, bench, items, models, tuple(j.model_id for j in judges) or ("",))
        disk = disk_estimate(store, bench, config.out_dir, models, work, logs)
    finally:
        if store is not None:
            store.close()
    remaining = sum(work[m.label].remaining for m in models)
    busy = [m for m in models if work[m.label].todo]
    return busy + (list(judges) if busy else []), disk["needed_bytes"], remaining


# --- the check ---------------------------------------------------------------------------------


def unstacked(where: str, message: str) -> str:
    """``message`` without the leading prefixes that repeat its ``where`` (``model LABEL`` or
    ``judge LABEL``): each layer that passed the error on named the model again (``judge 'L':
    model 'hf-vlm': hf-vlm: weights ... not found``); the listing names it once, in ``where``."""
    role, _, label = where.partition(" ")
    if role not in ("model", "judge") or not label:
        return message
    family = label.split("[", 1)[0]
    while True:
        quoted = re.match(r"(?:model|judge) '([^']*)': ", message)
        if quoted and quoted.group(1) in (label, family):
            message = message[quoted.end():]
        elif message.startswith(f"{family}: "):
            message = message[len(family) + 2:]
        else:
            return message


NEEDS_DOWNLOAD_LABEL = "needs download (--prefetch)"


def fix_for(check: str, kind: str = "", package: Optional[str] = None) -> str:
    """The fix of a problem, from the check that found it and what it is (``kind``, one of
    :data:`icl.run.planning.check_parts.KINDS`; ``package``: the one a missing-package problem needs)."""
    if kind == MISSING_PACKAGE and package:
        return package_fix(package)
    if kind == CACHE_DAMAGED:  # a file damaged in the Hugging Face cache (icl.models.hub.verify_cached)
        return "run the same command with --prefetch where the network is reachable: it downloads the file again"
    if kind == NEEDS_DOWNLOAD:
        return ("the weights need a download: run the same command with --prefetch where the network is reachable "
                "(same HF_HOME / HF_HUB_CACHE), then the run")
    if kind == CHECKPOINT_DAMAGED:
        return "download or copy the weight file again (it is truncated or damaged)"
    if kind == CHECKPOINT_REFUSED:
        return "save the state dict again with torch.save (or safetensors), or point weights= at the published file"
    if check == "checkpoint":
        return "point weights= at the checkpoint of the architecture config.json declares (or the config.json of "\
               "these weights)"
    if check == "data":
        return "restore the missing or unreadable files of the release (docs/data-format.md), or leave that "\
               "dataset or task out (--datasets / --tasks)"
    if check == "judges":
        return "give a judge that is present and can judge this benchmark: --judge NAME[:weights=PATH]"
    if check == "models":
        if kind == CANNOT_SERVE:  # a model this benchmark (as configured) cannot serve
            return "leave the model out of --models, or change what the message names"
        return "fix the model's arguments or weights (--models NAME:weights=PATH; docs/models.md)"
    if check == "output":
        return "wait for that run to finish, or choose another output folder (--out)"
    if check == "disk":
        return "free disk space, or choose an output folder (--out) and store (--store) on a larger disk"
    if check == "device":
        return "use --device cpu or auto"
    return "see the message"


def preflight(config: RunConfig, free_space: Optional[FreeSpace] = None) -> dict[str, Any]:
    """Check ``config`` (see the module docstring); returns what check.json holds."""
    from icl.models import hub
    from icl.run.planning.check_cost import (calibrate, http_cost, judge_time_estimate, remove_stale_scratch, stored_answers,
                                    time_estimate)
    from icl.run.outputs.files import folder_refusal
    from icl.run.outputs.lock import FolderLock
    from icl.run.planning.models import resolve_device
    from icl.run.planning.setup import absolute_paths, check_judges, instantiate_models, open_benchmark, planned_items
    from icl.run.outputs.samples import log_samples
    from icl.store import Store, StoreError

    t0 = time.perf_counter()
    free_space = free_space or disk_free
    problems: list[Problem] = []
    warnings: list[str] = []

    stale = remove_stale_scratch()  # the scratch folders of --calibrate checks that were killed
    if stale:
        warnings.append(f"removed {len(stale)} scratch folder(s) of --calibrate checks that were killed before "
                        f"removing them: {', '.join(str(p) for p in stale)}")

    def add(check: str, where: str, message: str, cause: Optional[BaseException] = None, kind: str = "") -> None:
        """A problem; what it is (``kind``) from the error that said it (``cause``) unless given."""
        # one line (a library's message may span several), naming its model once (in where)
        message = unstacked(where, " ".join(line.strip() for line in message.strip().splitlines() if line.strip()))
        kind = kind or kind_of(cause)
        problems.append(Problem(check, where, message, fix_for(check, kind, package_of(cause)), kind))

    absolute_paths(config)
    hub.forget()
    out, store_path = config.out_dir, config.store_path
    report: dict[str, Any] = dict(benchmark=config.benchmark, out=str(out), store=str(store_path),
                                  command=config.command, device=dict(declared=config.device))
    # the device: CUDA as declared (a login node has none), a warning says so
    identity_device = None
    try:
        device = resolve_device(config.device)
    except ConfigError as exc:
        if re.fullmatch(r"cuda(:\d+)?", config.device):
            device, identity_device = config.device, "cpu"
            warnings.append(f"--device {config.device} checked as declared, not as seen ({exc}); model identities "
                            f"are matched against the store's CUDA ones")
        else:
            add("device", "--device", str(exc))
            device = "cpu"
    report["device"].update(used=device, seen=identity_device is None, memory=free_device_memory(device))
    if config.ray:
        warnings.append(f"--ray {config.ray}: the cluster is not joined by --check (the run joins it first)")
    try:
        bench = open_benchmark(config)
    except ConfigError as exc:
        add("plan", "benchmark", str(exc))
        return _finish(report, problems, warnings, t0)
    items: list[Any] = []
    extra: dict[str, Any] = {}
    try:
        items, extra = planned_items(bench, config)
    except (ConfigError, OSError) as exc:  # what the run stops at (an OSError: a file the loading could not read)
        add("data", config.benchmark, str(exc))
    try:
        failures = bench.data_failures()
    except (ValueError, LookupError, OSError) as exc:  # the plan itself failed: reported once, above
        failures = [] if any(p.message == str(exc) for p in problems) else [(config.benchmark, str(exc), None)]
    for where, message, path in failures:
        add("data", where, message + (f" ({path})" if path and str(path) not in message else ""))
    found: list[Found] = []
    with hub_offline():
        models, judges = instantiate_models(config, bench, device, found, identity_device)
    named_judges = any(w.startswith("judge ") for w, _, _ in found)
    for m in models:  # what load() reads before the weights
        try:
            m.adapter.check_loadable()
        except ImportError as exc:  # a package its processor needs (Qwen2-VL's: torchvision)
            found.append((f"model {m.label}", missing_package_message(exc), exc))
        except Exception as exc:
            found.append((f"model {m.label}", f"model {m.label!r}: {exc}", exc))
    for j in list(judges):  # the run's judge check reads them too, and meets no missing package
        try:
            j.adapter.check_loadable()
        except ImportError as exc:
            found.append((f"judge {j.label}", missing_package_message(exc), exc))
            judges.remove(j)
            named_judges = True
        except Exception:  # listed by _check_judges below
            pass
    check_judges(bench, items, models, judges, found, judge_named=named_judges)
    for where, message, cause in found:
        add("judges" if where.startswith("judge") else "models", where, message, cause)
    for snap in hub.resolved_snapshots():  # the cached configurations and tokenizers hashed, as --prefetch
        for message in hub.verify_snapshot(snap, lfs=False):  # does (weights: their headers, below)
            add("checkpoint", f"cache {snap.ref.text}", message, kind=CACHE_DAMAGED)
    # checkpoints and resources per model
    entries: dict[str, dict[str, Any]] = {}
    for role, m in [("model", m) for m in models] + [("judge", j) for j in judges]:
        ckpt = inspect_weights(m.adapter)
        for message, kind in zip(ckpt.problems, ckpt.kinds):
            add("checkpoint", f"{role} {m.label}", message, kind=kind)
        precision = getattr(m.adapter, "loaded_precision", getattr(m.adapter, "precision", None))
        per = BYTES_PER_PARAM.get(precision) if isinstance(precision, str) else None
        entries[m.label] = dict(label=m.label, role=role, model_id=m.model_id, adapter=m.identity["adapter"],
                                precision=precision, weight_files=ckpt.files, params=ckpt.params or None,
                                checkpoint_dtypes=ckpt.dtypes, stored_bytes=ckpt.stored_bytes or None,
                                bytes=(ckpt.params * per if per and ckpt.params else ckpt.stored_bytes or None),
                                notes=ckpt.notes)
        entries[m.label]["memory"] = memory_estimate(m.adapter, entries[m.label]["bytes"], per or 4)
    # the store, read-only: the resume, the cost, the size of an answer
    store = None
    if store_path.is_file():
        try:
            store = Store(store_path, readonly=True)
        except StoreError as exc:
            add("output", "store", str(exc))
    try:
        # a judge left out for a problem above still scores every answer: counted, nothing stored of it
        named = len(config.judges or [s for j in bench.default_judges for s in parse_models(j)])
        stored_ids = _stored_ids(store, [*models, *judges], identity_device is not None, warnings)
        judge_ids = (tuple(stored_ids.get(j.model_id, j.model_id) for j in judges)
                     + tuple(f"(unavailable judge {i})" for i in range(named - len(judges)))) or ("",)
        cells, total_remaining, total_stored, planned_models = [], 0, 0, len(models)
        logs = log_samples(config.log_samples, len(items) * len(models))
        works = pending_work(store, bench, items, models, judge_ids, stored_ids)
        report["refusals"], refused = refusal_check(bench, items, models, warnings)  # 8
        for m in models:  # what a model refuses is never computed: not remaining, not timed, no disk
            leave_out_refused(bench, works[m.label], refused.get(m.label, set()))
        for m in models:
            mid, work = stored_ids.get(m.model_id, m.model_id), works[m.label]
            for task, (planned, stored) in work.cells.items():
                cells.append(dict(task=task, model=m.label, model_id=m.model_id, planned=planned, stored=stored,
                                  remaining=planned - stored))
            e = entries[m.label]
            e.update(planned=work.served * len(judge_ids), stored=work.skipped, remaining=work.remaining,
                     items_remaining=len(work.todo), not_applicable=work.not_applicable)
            total_remaining += work.remaining
            total_stored += work.skipped
            answered = stored_answers(store, bench, m, work.todo, mid)  # a new judge: the answers are reused
            e.update(time_estimate(store, mid, m.label, len(work.todo), answered=answered))  # icl.run.planning.check_cost
            e.update(http_cost(store, bench, m, work.todo, mid))
        for label, work in download_work(config, bench, items, judge_ids, found).items():
            for task, (planned, stored) in work.cells.items():
                cells.append(dict(task=task, model=label, model_id=None, planned=planned, stored=0,
                                  remaining=planned, needs_download=True))
            entries[label] = dict(label=label, role="model", model_id=None, needs_download=True, planned=work.served *
                                  len(judge_ids), stored=0, remaining=work.served * len(judge_ids),
                                  items_remaining=len(work.todo), not_applicable=work.not_applicable,
                                  estimated_s=None, estimate=f"unknown ({NEEDS_DOWNLOAD_LABEL})")
            total_remaining += work.served * len(judge_ids)
            planned_models += 1
        for j, jid in zip(judges, judge_ids):  # each judge asked about every answer it has not scored
            todo = sum(1 for w in works.values() for it in w.todo if jid in w.unscored.get(it.key, (jid,)))
            entries[j.label].update(items_remaining=todo)
            entries[j.label].update(judge_time_estimate(store, jid, j.label, todo))
        disk = disk_estimate(store, bench, out, models, works, logs, stored_ids)
    finally:
        if store is not None:
            store.close()
    if config.calibrate:  # models without stored compute: their first items run for real, in a scratch store
        report["calibration"] = calibrate(config, bench, device, identity_device is not None, models, judges, works,
                                          entries, problems, warnings)
    busy = [e for e in entries.values() if e.get("items_remaining")]  # the models', then the judges' time
    known = all(e.get("estimated_s") is not None for e in busy)
    report["plan"] = dict(items=len(items), models=planned_models, judges=named, planned=total_stored +
                          total_remaining, stored=total_stored, remaining=total_remaining, cells=cells,
                          estimated_s=sum(e["estimated_s"] for e in busy) if known else None,
                          **({"shard": extra["shard"]} if "shard" in extra else {}))
    report["models"] = list(entries.values())
    # the output folder: its lock, its earlier runs, the disk
    holder = FolderLock(out).probe()
    if holder is not None:
        add("output", str(out), str(holder))
    if out.is_dir():
        why = folder_refusal(out, bench.name)
        if why is not None:
            add("output", str(out), why)
    report["lock"] = dict(held=holder is not None, holder=getattr(holder, "holder", None))
    report["resume"] = dict(store_exists=store_path.is_file(), stored=total_stored, remaining=total_remaining)
    free = int(free_space(out))
    report["disk"] = dict(path=str(out), free_bytes=free, **disk)
    why = disk_warning(out, disk["needed_bytes"], free, total_remaining)
    if why is not None:  # one policy with the run: a warning, never a stop (disk_warning)
        warnings.append(why)
    from icl.run.planning.check_context import context_check  # 7: the longest prompts against the context

    with hub_offline():
        report["context"] = context_check(bench, items, models, warnings)
    return _finish(report, problems, warnings, t0)


def download_work(config: RunConfig, bench: Any, items: Sequence[Any], judge_ids: Sequence[str],
                  found: Sequence[Found]) -> dict[str, Any]:
    """Per label of a model left out because its weights are not in the Hugging Face cache yet
    (``found``: the model problems, those whose error is :class:`icl.models.hub.HubNotCached`), its
    :class:`icl.run.planning.plan.ModelWork` as the run will plan it once downloaded: the items of
    the request types its class serves, none stored (its identity holds the commit it resolves to,
    known after the download)."""
    from icl.models.registry import model_factory
    from icl.run.planning.plan import model_work

    waiting = {where.partition(" ")[2] for where, _, cause in found if where.startswith("model ")
               and kind_of(cause) == NEEDS_DOWNLOAD}
    if not waiting:
        return {}
    specs = config.models if config.models is not None else [s for m in bench.models_by_default(bench.config)
                                                              for s in parse_models(m)]
    out = {}
    for spec in specs:
        if spec.label not in waiting:
            continue
        try:
            serves = tuple(getattr(model_factory(spec.name), "serves", ()) or ())
        except Exception:  # not a class that says what it serves: its plan stays unknown
            continue
        if not serves:
            continue
        # model_work calls both before it returns: the loop's `serves` is still this spec's
        out[spec.label] = model_work(bench, items, lambda t: any(issubclass(t, x) for x in serves), judge_ids,
                                     lambda judge_id: set())
    return out


def refusal_check(bench: Any, items: Sequence[Any], models: Sequence[Any],
                  warnings: list[str]) -> tuple[dict[str, Any], dict[str, set[str]]]:
    """Per (task, shots) and model, how many planned requests the model refuses and why (the
    first refusal's sentence): every planned request a model serves is built (reading its images)
    and put to the model's rule, for the models whose adapter has one (``would_refuse``
    overridden; the others refuse nothing). Each refusing cell is also a warning. Also returns, per
    model label, the keys of the items it refuses: the run never computes them, so the check's
    remaining scores, time and disk leave them out (:func:`leave_out_refused`)."""
    from icl.models.base import Adapter
    from icl.run.planning.plan import refusal

    shots_column = getattr(getattr(bench, "results_spec", None), "shots", None)
    built: dict[tuple[str, bool], Any] = {}  # one build per item, whichever models ask it
    cells: dict[tuple[str, Any, str], dict[str, Any]] = {}
    keys: dict[str, set[str]] = {}
    for m in models:
        if type(m.adapter).would_refuse is Adapter.would_refuse:
            continue
        for it in items:
            if not m.serves(bench.request_type(it)):
                continue
            key = (it.key, bool(m.privileged))
            if key not in built:
                try:
                    built[key] = bench.request(it, m.privileged)
                except Exception:  # the data check lists it; the run records it as a data failure
                    built[key] = None
            if built[key] is None:
                continue
            shots = it.group.get(shots_column) if shots_column else None
            cell = cells.setdefault((bench.item_kind(it), shots, m.label), dict(
                task=bench.item_kind(it), shots=shots, model=m.label, items=0, refused=0, why=None))
            cell["items"] += 1
            why = refusal(m.adapter, built[key])
            if why is not None:
                cell["refused"] += 1
                cell["why"] = cell["why"] or why
                keys.setdefault(m.label, set()).add(it.key)
    refused = [c for c in cells.values() if c["refused"]]
    for label in dict.fromkeys(c["model"] for c in refused):  # one line per model; the table says why
        mine = [c for c in refused if c["model"] == label]
        named = ", ".join(f"{c['task']}" + ("" if c["shots"] is None else f" {c['shots']} shots") for c in mine)
        warnings.append(f"model {label} refuses {sum(c['refused'] for c in mine)} planned items ({named}; why: the "
                        f"refused requests table): the run records them as not applicable, stored, never scored")
    return dict(cells=refused, refused=sum(c["refused"] for c in refused)), keys


def leave_out_refused(bench: Any, work: Any, refused: set[str]) -> None:
    """Take the items a model refuses out of its pending ``work`` (an
    :class:`icl.run.planning.plan.ModelWork`): not to do, not planned in their task's cell, counted
    as not applicable under ``KIND (refused)``, as the run records them."""
    if not refused:
        return
    kept = []
    for it in work.todo:
        if it.key not in refused:
            kept.append(it)
            continue
        judges = len(work.unscored.pop(it.key, ())) or work.judges
        work.served -= 1
        cell = work.cells.get(str(it.group.get("task", bench.name)))
        if cell is not None:
            cell[0] -= judges
        kind = f"{bench.item_kind(it)} (refused)"
        work.not_applicable[kind] = work.not_applicable.get(kind, 0) + 1
    work.todo = kept


def refusal_lines(refusals: Optional[dict[str, Any]]) -> list[str]:
    """The printed table of a :func:`refusal_check` (none when no model refuses anything)."""
    if not refusals or not refusals.get("cells"):
        return []
    rows: list[tuple[str, ...]] = [("task", "shots", "model", "refused", "why (first)")]
    rows += [(c["task"], "" if c["shots"] is None else str(c["shots"]), c["model"], f"{c['refused']} of {c['items']}",
              str(c["why"])) for c in refusals["cells"]]
    return ["refused requests (not applicable: stored, never scored):"] + text_table(rows, right=(1, 3))


def _chat() -> type:
    from icl.models.requests import ChatRequest

    return ChatRequest


def _stored_ids(store: Any, models: Sequence[Any], declared_cuda: bool, warnings: list[str]) -> dict[str, str]:
    """Model id -> the id its scores are stored under. The same id, except for a CUDA device
    checked as declared: the identity holds the GPU's name, which only the store knows; a stored
    identity equal but for a CUDA device stands for it."""
    if store is None or not declared_cuda:
        return {}
    stored = store.models()
    out = {}
    for m in models:
        mine = {k: v for k, v in m.identity.items() if k != "device"}
        match = [mid for mid, (_, ident) in stored.items() if str(ident.get("device", "")).startswith("cuda")
                 and {k: v for k, v in ident.items() if k != "device"} == mine]
        if match:
            out[m.model_id] = match[-1]
            if len(match) > 1:
                warnings.append(f"model {m.label}: the store holds it for {len(match)} CUDA devices; the resume "
                                f"counted is that of {stored[match[-1]][1].get('device')}")
    return out


def _finish(report: dict[str, Any], problems: list[Problem], warnings: list[str], t0: float) -> dict[str, Any]:
    report.setdefault("plan", None)
    report.setdefault("models", [])
    report.setdefault("context", None)
    report["problems"] = [asdict(p) for p in problems]
    report["warnings"] = warnings
    report["runnable"] = not problems
    report["exit_code"] = EXIT_OK if not problems else EXIT_PROBLEMS
    report["elapsed_s"] = time.perf_counter() - t0
    return report


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def render(report: dict[str, Any]) -> str:
    """The terminal text of a check: the plan table, the models, every problem with its fix."""
    from icl.run.planning.check_cost import render_cost

    lines = [f"icl.run --check {report['benchmark']}: output {report['out']}, store {report['store']}, "
             f"device {report['device'].get('used', report['device']['declared'])}"
             + ("" if report["device"].get("seen", True) else " (as declared)")]
    plan = report.get("plan")
    rows: list[tuple[str, ...]] = [("task", "model", "planned", "stored", "remaining")]
    if plan:
        rows += [(c["task"], c["model"] + (f" ({NEEDS_DOWNLOAD_LABEL})" if c.get("needs_download") else ""),
                  str(c["planned"]), str(c["stored"]), str(c["remaining"])) for c in plan["cells"]]
        rows.append(("all", f"{plan['models']} model(s), {plan['judges']} judge(s)", str(plan["planned"]),
                     str(plan["stored"]), str(plan["remaining"])))
    lines += text_table(rows, right=(2, 3, 4))
    rows = [("model", "role", "params", "bytes", "peak memory (batch)", "estimated time")]
    for e in report["models"]:
        peaks = (e.get("memory") or {}).get("peak_bytes") or {}
        peak = ", ".join(f"{_size(v)} ({b})" for b, v in peaks.items() if v is not None) or "-"
        rows.append((e["label"], e["role"] + (f" {e['precision']}" if e.get("precision") else ""),
                     f"{e['params']:,}" if e.get("params") else "-", _size(e["bytes"]) if e.get("bytes") else "-",
                     peak, e.get("estimate") or "-"))
    lines += text_table(rows, right=(2, 3, 4))
    lines += render_cost(report)
    memory = report["device"].get("memory")
    if memory:
        lines.append(f"device memory: {_size(memory['free_bytes'])} free of {_size(memory['total_bytes'])}")
    disk = report.get("disk")
    if disk:
        lines.append(f"disk: about {_size(disk['needed_bytes'])} needed, {_size(disk['free_bytes'])} free under "
                     f"{disk['path']}")
    from icl.run.planning.check_context import context_lines

    lines += context_lines(report.get("context"))
    lines += refusal_lines(report.get("refusals"))
    for w in report["warnings"]:
        lines.append(f"warning: {w}")
    if report["problems"]:
        lines.append(f"{len(report['problems'])} problem(s):")
        for i, p in enumerate(report["problems"], 1):
            lines.append(f"  {i}. [{p['check']}] {p['where']}: {p['message']}")
            lines.append(f"     fix: {p['fix']}")
    lines.append(f"{'runnable' if report['runnable'] else 'NOT runnable'} (exit {report['exit_code']}); "
                 f"checked in {report['elapsed_s']:.1f} s")
    return "\n".join(lines)


def check(config: RunConfig, stdout: Optional[TextIO] = None, free_space: Optional[FreeSpace] = None) -> int:
    """``--check``: :func:`preflight`, its table on ``stdout``, ``check.json`` in the output
    folder; returns the exit status (0 runnable, 2 problems)."""
    from icl.store.atomic import OutputWriteError, write_text

    stdout = stdout or sys.stdout
    report = preflight(config, free_space)
    path = config.out_dir / CHECK_FILE
    report["check_file"] = str(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps(report, indent=1, sort_keys=True, default=str) + "\n")
    except (OSError, OutputWriteError) as exc:
        report["problems"].append(asdict(Problem("output", str(path), f"cannot write {CHECK_FILE}: {exc}",
                                                 fix_for("disk"))))
        report["runnable"], report["exit_code"] = False, EXIT_PROBLEMS
    print(render(report), file=stdout)
    print(f"check.json: {path}", file=stdout)
    return report["exit_code"]
