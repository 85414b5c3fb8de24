"""The adapter ABC shared by every benchmark.

Requests are plain typed data (:mod:`icl.models.requests`); adapters declare the request types
they serve (``serves``) and own resizing, normalisation, chat templates, batching and precision.
The runner hands an adapter at most ``batch_size`` requests per ``predict`` call.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Optional, Sequence

from icl.models.requests import AnalogyRequest

if TYPE_CHECKING:
    from icl.models.memory import ActivationMemory

PRECISIONS = ("fp32", "fp16", "bf16")
# Modules whose adapters the runner may hand the ground truth (``privileged``): icl's own baselines.
REFERENCE_MODULES = ("icl.models.builtin", "icl.models.icl_baselines")


@dataclass(frozen=True)
class Architecture:
    """One network an adapter's ``load`` builds from a folder: ``cls`` (a transformers or
    diffusers model class, ``Auto*`` classes included) built from ``folder``'s ``config.json``
    (or from ``config`` when the adapter maps the folder's configuration itself), its weights
    read from the ``*.safetensors`` files directly in ``folder``."""

    folder: Path
    cls: Any
    config: Any = None


class RequestRefused(ValueError):
    """A request this model cannot answer as asked, known from the request alone (its images,
    its kind): :meth:`Adapter.would_refuse` says why. ``predict`` returns it in the request's
    slot, never raises it, so the batch's other requests are answered. The runner records it as
    the outcome ``refused``: not applicable to this model, stored (never asked again with the same
    settings), never scored 0, never a failure, never a reason to stop the model."""

    icl_reason = "refused"


class ContextOverflowError(ValueError):
    """The request does not fit the model's context window. Raised per request (never
    truncated silently); the runner records it as ``overflow`` for that item."""


def exceeds_context(prompt_tokens: int, max_new_tokens: int, context: Optional[int]) -> bool:
    """The context rule: a request overflows when its prompt (images included) plus the new tokens
    it may generate exceed the model's context (never, when the context is unknown). The adapters'
    run-time guard and ``--check`` (:mod:`icl.run.planning.check_context`) both decide with it."""
    return context is not None and prompt_tokens + max_new_tokens > context


@dataclass(frozen=True)
class PromptLength:
    """A request's prompt as the model would see it: ``tokens`` (images included, counted as the
    run counts them) and the model's ``context`` (None: unknown, so overflow is not guarded)."""

    tokens: int
    context: Optional[int]

    def overflows(self, max_new_tokens: int) -> bool:
        return exceeds_context(self.tokens, max_new_tokens, self.context)


class Adapter(ABC):
    """A model behind the visual in-context interface.

    Class attributes: ``name`` (registry id), ``version`` (bump when outputs change: it is part
    of every stored result's key), ``batch_size`` (most requests per ``predict`` call),
    ``precision`` (one of ``PRECISIONS``; the runner may override it before ``load``),
    ``privileged`` (asks for ``oracle_target`` / ``oracle_answer``; the runner grants it only to the
    built-in reference adapters of :data:`REFERENCE_MODULES` and refuses any other adapter that
    asks), ``reference`` (a reference point such as the oracle or identity: reported beside the
    evaluated models and left out of their ranks), ``accepts_tensors``
    (the adapter takes requests whose images are torch tensors on its device, see
    :class:`AnalogyRequest`, and answers with torch tensors on that device: the runner then
    uploads each batch once and decodes and scores the outputs where they are), ``serves``
    (the request types ``predict`` accepts; the runner refuses a benchmark asking for others),
    ``execution_args`` (names of ``__init__`` arguments that cannot change an answer: concurrency,
    timeouts, retries, rate limits, offloading; batch size only where the adapter proves batch
    invariance), ``note`` (a caveat on the answers, recorded in results.json).
    Model arguments are the keyword arguments of ``__init__`` (``--model-arg key=value``); all of
    them but ``execution_args``, with their defaults, are part of the model's identity, so a
    stored answer is reused across execution settings and never across anything else.
    """

    name: ClassVar[str] = "adapter"
    version: ClassVar[str] = "0"
    serves: ClassVar[tuple[type, ...]] = (AnalogyRequest,)
    batch_size: int = 1
    precision: str = "fp32"
    privileged: ClassVar[bool] = False
    reference: ClassVar[bool] = False
    accepts_tensors: ClassVar[bool] = False
    execution_args: ClassVar[frozenset[str]] = frozenset()
    # what a reader of the results must know about this model's answers (e.g. random weights);
    # results.json records it beside the judge or model
    note: ClassVar[str] = ""

    @property
    def loaded_precision(self) -> str:
        """The precision the weights are loaded at: a neural family's ``dtype`` argument
        (``dtype_arg``), which wins over ``precision``, else ``precision``."""
        return getattr(self, "dtype_arg", None) or self.precision

    def weight_files(self) -> Sequence[Path]:
        """The local weight files this instance will load (resolved from its model arguments,
        without loading them). Their SHA-256 digests are part of the model's identity, so a
        stored answer is never reused for other weights. Weight-free adapters return ()."""
        return ()

    def architectures(self) -> Sequence[Architecture]:
        """The networks :meth:`load` builds from configuration folders (resolved, nothing read).
        ``--check`` builds each on the ``meta`` device and compares its parameter names and shapes
        with the safetensors headers (:mod:`icl.run.planning.check`), so a checkpoint of another
        architecture fails before a device is held. Default: none (nothing compared)."""
        return ()

    def load(self, device: str) -> None:
        """Load weights onto ``device`` ("cpu", "cuda", "cuda:1", ...). Called once before predict."""
        self.device = device

    def check_loadable(self) -> None:
        """A cheap check, without loading the weights, that :meth:`load` can read this instance's
        files (configuration, processor); raises ``WeightsError`` or ``ValueError`` in one line. The
        runner calls it for every judge before any generation (default: nothing to check)."""

    def prompt_length(self, request: Any) -> Optional[PromptLength]:
        """The token length of ``request``'s prompt and the context it must fit, known without the
        weights (after :meth:`check_loadable`): the count the run's own overflow guard compares,
        so ``--check`` can say which prompts will overflow. None: this adapter cannot tell
        (the default; an adapter that can overrides this)."""
        return None

    def activation_memory(self, bytes_per_value: int) -> Optional["ActivationMemory"]:
        """One request's activation memory on the device, estimated from this instance's
        configuration (config files, safetensors headers, model arguments: never the weights),
        ``bytes_per_value`` the bytes of a value at the precision the run asks for: the ``A`` of
        ``--check``'s ``peak(B) = W + B x A`` (:mod:`icl.models.memory` holds the shared formulas;
        each family documents its own). None (the default): not estimated, the check reports the
        weights alone. Never raises for a missing or unreadable configuration: None then."""
        return None

    def would_refuse(self, request: Any) -> Optional[str]:
        """The adapter's one refusal rule: why it would refuse ``request`` (one line), decided
        from the request alone, without weights; None when it may take it. ``predict`` answers a
        refused request with :class:`RequestRefused` of this sentence in its slot. The runner asks
        it before sending each request (a refused one is recorded as not applicable, never sent),
        ``--check`` asks it for every planned request (its refused cells, like overflow), and a
        judge is asked about the run's stand-in judge request before any generation, so a judge
        that cannot judge the benchmark is refused at once."""
        return None

    @abstractmethod
    def predict(self, requests: Sequence[Any]) -> list[Any]:
        """One output per request, in order. For an :class:`AnalogyRequest` or a
        :class:`~icl.models.requests.GenerationRequest` an image: uint8
        ``[h, w, 3]`` or float in [0, 1] (float16, bfloat16 or float32 torch tensors are taken
        as they are; any ``h, w``), numpy or torch on any device; a ``[B, h, w, 3]`` tensor may
        stand for the whole list. For a :class:`~icl.models.requests.ChatRequest` a str."""
