"""What every neural visual in-context adapter shares: precision, device, optional
``torch.compile``, weight lookup, and batched prediction over groups of same-shape requests."""

from __future__ import annotations

import json
import logging
from abc import abstractmethod
from pathlib import Path
from typing import Any, Hashable, Mapping, Optional, Sequence, Union

import numpy as np
import torch

from icl.models.base import PRECISIONS, Adapter
from icl.models.requests import AnalogyRequest
from icl.models.vicl.canvas import check_analogy, group_by

TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
_DTYPE_ALIASES = {"float32": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16"}

log = logging.getLogger(__name__)

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def config_file(config: Union[None, str, Mapping[str, Any]]) -> Optional[Path]:
    """The JSON file a ``config`` argument names, or None (no config, a mapping or inline JSON)."""
    if config is None or isinstance(config, Mapping) or str(config).strip().startswith("{"):
        return None
    return Path(str(config).strip()).expanduser()


def parse_config(config: Union[None, str, Mapping[str, Any]], model: str) -> dict[str, Any]:
    """A model-architecture override: None (the official configuration), a mapping, a JSON
    object string, or the path of a JSON file."""
    if config is None:
        return {}
    if isinstance(config, Mapping):
        return dict(config)
    text = str(config).strip()
    path = config_file(config)
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"{model}: config {config!r} is neither a JSON object nor a readable file ({exc})") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{model}: config is not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{model}: config must be a JSON object, got {type(data).__name__}")
    return data


def to_device_tensor(images: Sequence[np.ndarray], device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """uint8 ``[H, W, 3]`` arrays of one size -> float ``[B, 3, H, W]`` in [0, 1] on ``device``."""
    batch = torch.from_numpy(np.stack(images)).to(device)
    return batch.permute(0, 3, 1, 2).to(dtype) / 255


def cpu_has_fast_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX); elsewhere torch emulates
    bf16 convolutions and matrix products, several times slower than fp32."""
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def checked_device(model: str, device: str, dtype: torch.dtype) -> torch.device:
    """``device`` as a torch device; refuses CUDA where there is none and warns about bf16 on a
    CPU without native bf16 (answers are right, only slow)."""
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"{model}: device {device!r} requested but CUDA is not available")
    if dev.type == "cpu" and dtype == torch.bfloat16 and not cpu_has_fast_bf16():
        log.warning("%s: bf16 on a CPU without native bf16 (no avx512_bf16/amx_bf16) is emulated and slow; "
                    "dtype=fp32 is faster here", model)
    return dev


def compiled(net: Any, option: Union[bool, str]) -> Any:
    """``net`` wrapped by ``torch.compile`` when ``option`` is true (inductor) or a backend name."""
    if not option:
        return net
    return torch.compile(net, backend=option if isinstance(option, str) else "inductor")


def compile_option(value: Union[bool, str]) -> Union[bool, str]:
    """The ``compile`` model argument: a bool, "true"/"false"/"1"/"0", or a backend name."""
    if isinstance(value, str) and value.lower() in ("true", "false", "0", "1", ""):
        return value.lower() in ("true", "1")
    return value


def dtype_option(model: str, dtype: Optional[str]) -> Optional[str]:
    """The ``dtype`` model argument as a precision name (fp32/fp16/bf16, aliases accepted), or None."""
    if dtype is None:
        return None
    key = _DTYPE_ALIASES.get(str(dtype), str(dtype))
    if key not in PRECISIONS:
        raise ValueError(f"{model}: dtype must be one of {', '.join(PRECISIONS)}, got {dtype!r}")
    return key


class TorchAdapter(Adapter):
    """Base of the neural adapters. Model arguments shared by all: ``weights`` (a file or
    folder; default ``$ICL_WEIGHTS_DIR/<name>/<official file>``), ``dtype`` (fp32/fp16/bf16;
    overrides ``precision``), ``compile`` (wrap the network in ``torch.compile``: true for
inductor, or a backend name), ``config``
    (architecture override as JSON, for small test models; default the official one).

    Subclasses implement :meth:`build` (network with weights, on the host) and
    :meth:`run_group` (one batch of requests sharing :meth:`group_key`). Outputs are float32
    ``[h, w, 3]`` tensors in [0, 1] on the model's device.
    """

    accepts_tensors = True

    def __init__(self, weights: Optional[str] = None, dtype: Optional[str] = None,
                 compile: Union[bool, str] = False, config: Union[None, str, Mapping[str, Any]] = None):
        self.dtype_arg = dtype_option(self.name, dtype)
        self.weights = weights
        self.compile: Union[bool, str] = compile_option(compile)
        self.config_overrides = parse_config(config, self.name)
        self.config_path = config_file(config)
        self.net: Any = None
        self.device = "cpu"

    @property
    def torch_dtype(self) -> torch.dtype:
        return TORCH_DTYPES[self.dtype_arg or self.precision]

    @abstractmethod
    def model_files(self) -> Sequence[Path]:
        """The weight files and folders this instance loads (resolved, not read)."""

    def weight_files(self) -> Sequence[Path]:
        """:meth:`model_files` and the ``config`` file when one is named: its contents are part
        of the model's identity (editing the file never reuses the old answers)."""
        return tuple(self.model_files()) + ((self.config_path,) if self.config_path is not None else ())

    @abstractmethod
    def build(self) -> torch.nn.Module:
        """The network with its weights loaded, on the host in float32."""

    def load(self, device: str) -> None:
        dev = checked_device(self.name, device, self.torch_dtype)
        self.net = compiled(self.build().to(device=dev, dtype=self.torch_dtype).eval(), self.compile)
        self.device = str(dev)

    def group_key(self, req: AnalogyRequest) -> Hashable:
        """Requests with equal keys are stacked into one batch (default: all together)."""
        return ()

    @abstractmethod
    def run_group(self, requests: Sequence[AnalogyRequest]) -> list[torch.Tensor]:
        """Answers of one group, in order: float ``[h, w, 3]`` tensors in [0, 1]."""

    def predict(self, requests: Sequence[AnalogyRequest]) -> list[Any]:
        if self.net is None:
            raise RuntimeError(f"{self.name}: call load(device) before predict")
        for req in requests:
            check_analogy(req, self.name)
        out: list[Any] = [None] * len(requests)
        with torch.inference_mode():
            for _, idx in group_by(requests, self.group_key).items():
                answers = self.run_group([requests[i] for i in idx])
                for i, a in zip(idx, answers):
                    out[i] = a.float().clamp(0, 1)
        return out


class CheckpointNetworkAdapter(TorchAdapter):
    """A :class:`TorchAdapter` whose network is its own torch module loaded strictly from a
    ``torch.save`` / safetensors checkpoint (Painter, MAE-VQGAN): ``build`` is :meth:`network`
    with :meth:`checkpoint_state` loaded, and ``--check`` applies the same rule before any load
    (the network built on ``meta``, the checkpoint mapped: :func:`icl.run.planning.check.inspect_weights`)."""

    #: what a checkpoint that does not fit :meth:`network` is called in the error, and the names
    #: it may hold that the network has no place for (training-only tensors)
    checkpoint_label: str = ""
    checkpoint_ignore: tuple[str, ...] = ()

    @abstractmethod
    def network(self) -> torch.nn.Module:
        """The network without its weights (``--check`` builds it on the ``meta`` device)."""

    @abstractmethod
    def checkpoint_state(self, mmap: bool = False) -> tuple[Path, dict[str, torch.Tensor]]:
        """The file a mismatch is named by and the state dict :meth:`network` loads (``mmap``:
        tensors that map their files, for names and shapes)."""

    def build(self) -> torch.nn.Module:
        """:meth:`network` with :meth:`checkpoint_state` loaded strictly (the rule ``--check``
        applies, :func:`icl.models.vicl._load.state_mismatch`)."""
        from icl.models.vicl._load import load_module

        net = self.network()
        path, state = self.checkpoint_state()
        load_module(net, state, path, self.checkpoint_label or self.name, ignore=self.checkpoint_ignore)
        return net
