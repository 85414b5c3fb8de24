"""Lazy model registry.

Entries map a name to ``"module:attr"`` (imported only when the model is asked for) or to a
callable. Third-party packages add models through the entry-point group ``icl.models``::

    [project.entry-points."icl.models"]
    my-model = "my_package.adapter:MyAdapter"

The attribute is a factory (usually the adapter class) called with ``get_model``'s keyword
arguments; it must return an :class:`~icl.models.base.Adapter`.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Union

from icl._lazy import import_target, plugin_entry_points
from icl.models.base import PRECISIONS, Adapter

log = logging.getLogger("icl.models")

ENTRY_POINT_GROUP = "icl.models"

Target = Union[str, Callable[..., Adapter]]

_BUILTIN: dict[str, str] = {
    "oracle": "icl.models.builtin:Oracle",
    "copy-target": "icl.models.builtin:CopyTarget",
    "identity": "icl.models.builtin:Identity",
    "copy-last": "icl.models.icl_baselines:CopyLast",
    "frequent-answer": "icl.models.icl_baselines:FrequentAnswer",
    "hf-vlm": "icl.models.vlm.hf:HFVisionLanguage",
    "tiny-chat-judge": "icl.models.vlm.tiny:TinyChatJudge",
    "openai": "icl.models.vlm.openai:OpenAIChat",
    "image-analogies": "icl.models.vicl.image_analogies:ImageAnalogies",
    "painter": "icl.models.vicl.painter:Painter",
    "mae-vqgan": "icl.models.vicl.mae_vqgan:MAEVQGAN",
    "lvm": "icl.models.vicl.lvm:LVM",
    "delvm": "icl.models.vicl.lvm:DeLVM",
    "prompt-diffusion": "icl.models.vicl.prompt_diffusion:PromptDiffusion",
    "sd-vicl": "icl.models.vicl.sd_vicl:SDVICL",
    "diffusers-t2i": "icl.models.t2i.diffusers_t2i:DiffusersText2Image",
    "flux-kontext": "icl.models.t2i.diffusers_t2i:FluxKontext",
    "qwen-image-edit": "icl.models.t2i.diffusers_t2i:QwenImageEdit",
    "janus": "icl.models.t2i.janus:Janus",
    "openai-images": "icl.models.t2i.openai_images:OpenAIImages",
    "clip-judge": "icl.models.t2i.clip_judge:CLIPJudge",
    "cobsat-judge": "icl.benchmarks.cobsat.judge:CoBSATJudge",
    "seggpt": "icl.models.vicl.seggpt:SegGPT",
    "visualcloze": "icl.models.vicl.visualcloze:VisualCloze",
    "collage": "icl.benchmarks.vif.models:Collage",
    "vif-spatial-judge": "icl.benchmarks.vif.models:SpatialJudge",
}
_registered: dict[str, Target] = {}


class UnknownModelError(LookupError):
    """No model of that name is registered (built-in, ``register_model`` or entry point)."""


def register_model(name: str, target: Target, *, replace: bool = False) -> None:
    """Register ``name`` -> ``"module:attr"`` (lazy) or a factory returning an Adapter."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"model name must be a non-empty string, got {name!r}")
    if isinstance(target, str):
        _check_target_string(name, target)
    elif not callable(target):
        raise TypeError(f"model {name!r}: target must be 'module:attr' or a callable, got {type(target).__name__}")
    if not replace and (name in _BUILTIN or name in _registered):
        raise ValueError(f"model {name!r} is already registered (pass replace=True to override)")
    _registered[name] = target


def unregister_model(name: str) -> None:
    """Remove a model added with ``register_model`` (built-ins and entry points stay)."""
    _registered.pop(name, None)


def _check_target_string(name: str, target: str) -> None:
    module, sep, attr = target.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"model {name!r}: target {target!r} is not of the form 'module:attr'")


def _entry_points() -> dict[str, Any]:
    return plugin_entry_points(ENTRY_POINT_GROUP, _BUILTIN, "model", log)


def list_models() -> list[str]:
    """Sorted names of every known model: built-ins, registered ones and entry points."""
    return sorted(set(_BUILTIN) | set(_registered) | set(_entry_points()))


def model_factory(name: str) -> Callable[..., Adapter]:
    """The factory (usually the adapter class) registered as ``name``; raises UnknownModelError."""
    target: Any = _registered.get(name) or _BUILTIN.get(name)
    if target is None:
        ep = _entry_points().get(name)
        if ep is None:
            raise UnknownModelError(f"unknown model {name!r}; known models: {', '.join(list_models())}")
        try:
            return ep.load()
        except Exception as exc:
            raise ImportError(f"model {name!r}: cannot load entry point {ep.value!r} "
                              f"({type(exc).__name__}: {exc})") from exc
    if callable(target):
        return target
    try:
        obj = import_target(target)
    except (ImportError, AttributeError) as exc:
        raise ImportError(f"model {name!r}: cannot import {target!r} ({type(exc).__name__}: {exc})") from exc
    return obj


def get_model(name: str, **kwargs: Any) -> Adapter:
    """Instantiate model ``name`` (not yet loaded: call ``load(device)``)."""
    factory = model_factory(name)
    model = factory(**kwargs)
    if not isinstance(model, Adapter):
        raise TypeError(f"model {name!r}: factory returned {type(model).__name__}, expected an icl.models.Adapter")
    if model.precision not in PRECISIONS:
        raise ValueError(f"model {name!r}: precision {model.precision!r} is not one of {PRECISIONS}")
    if not isinstance(model.batch_size, int) or model.batch_size < 1:
        raise ValueError(f"model {name!r}: batch_size must be a positive int, got {model.batch_size!r}")
    return model
