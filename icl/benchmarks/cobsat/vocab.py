"""CoBSAT's vocabularies and tasks: the one source of truth (PROTOCOL §4).

Values are the source's Table 5, in the order of the reference code's ``item_dict``
(``configs.py`` of UW-Madison-Lee-Lab/CoBSAT), which is the order of every option list and of
every prompt-list index. Values are kept as the reference spells them in file names (``3d``,
``park``); :func:`display` prints them through the reference's word map (``item2word``).

Used by the ``cobsat`` benchmark and meant for VL-ICL's ``cobsat`` task (one vocabulary, two
protocols): import :data:`VOCAB`, :data:`WORD_MAP`, :func:`display`, :data:`THEMES`,
:data:`TASKS` (or :func:`get_task`, which also takes VL-ICL's ``color_I`` spelling) and
:func:`image_relpath`.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

_VOCAB: dict[str, tuple[str, ...]] = {
    "color": ("yellow", "white", "red", "purple", "pink", "orange", "green", "brown", "blue", "black"),
    "object": ("leaf", "hat", "cup", "chair", "car", "box", "book", "ball", "bag", "apple"),
    "weather": ("tornado", "thunder", "sunny", "snowy", "sandstorm", "rainy", "rainbow", "hailstorm", "foggy",
                "aurora"),
    "animal": ("zebra", "tiger", "sheep", "pig", "monkey", "lion", "dog", "cow", "cat", "bird"),
    "style": ("watercolor", "sketch", "pixel", "origami", "lego", "icon", "graffiti", "futuristic", "3d", "old"),
    "action": ("swim", "sleep", "sing", "run", "read", "fly", "eat", "drink", "cry", "angry"),
    "background": ("beach", "desert", "glacier", "volcano", "park", "gym", "waterfall", "space", "cave", "seafloor"),
    "texture": ("wood", "wicker", "sequined", "plastic", "paper", "metal", "leather", "lace", "denim", "ceramic"),
}
VOCAB: Mapping[str, tuple[str, ...]] = MappingProxyType(_VOCAB)
"""space name -> its ten values, in the reference's order."""

WORD_MAP: Mapping[str, str] = MappingProxyType({"3d": "wireframe", "park": "amusement park"})
"""How the reference prints a value (``item2word``); values not listed print as themselves."""

_UNMAP = {v: k for k, v in WORD_MAP.items()}


def display(value: str) -> str:
    """``value`` as the prompts and option lists print it (``3d`` -> ``wireframe``)."""
    return WORD_MAP.get(value, value)


def undisplay(word: str) -> str:
    """The inverse of :func:`display` (``wireframe`` -> ``3d``)."""
    return _UNMAP.get(word, word)


@dataclass(frozen=True)
class Theme:
    """An image set: one image per (attribute, object); ``name`` is the reference's task type."""

    name: str  # "color_object"
    attribute: str  # space of the detail: "color"
    object: str  # space of the main object: "object" or "animal"
    drawable: bool  # whether CoBSAT-lite can draw it (actions cannot be drawn symbolically)


THEMES: Mapping[str, Theme] = MappingProxyType({t.name: t for t in (
    Theme("color_object", "color", "object", True),
    Theme("style_object", "style", "object", True),
    Theme("action_animal", "action", "animal", False),
    Theme("texture_object", "texture", "object", True),
    Theme("background_animal", "background", "animal", True),
)})


@dataclass(frozen=True)
class Task:
    """One of the ten tasks. "-I": the text gives the attribute and the object is latent; "-II":
    the text gives the object and the attribute is latent. ``number`` is the reference's task id."""

    name: str  # "Color-I"
    number: int
    theme: Theme

    @property
    def text_gives_attribute(self) -> bool:
        return self.name.endswith("-I")

    @property
    def text_space(self) -> str:
        """The space of the text values (``x``)."""
        return self.theme.attribute if self.text_gives_attribute else self.theme.object

    @property
    def latent_space(self) -> str:
        """The space of the latent value (``theta``)."""
        return self.theme.object if self.text_gives_attribute else self.theme.attribute

    @property
    def text_values(self) -> tuple[str, ...]:
        return VOCAB[self.text_space]

    @property
    def latent_values(self) -> tuple[str, ...]:
        return VOCAB[self.latent_space]

    def attribute_object(self, text_value: str, latent: str) -> tuple[str, str]:
        """The (attribute, object) an image of text value ``text_value`` and latent ``latent`` shows."""
        return (text_value, latent) if self.text_gives_attribute else (latent, text_value)


def _tasks() -> dict[str, Task]:
    themes = ("color_object", "color_object", "background_animal", "background_animal", "style_object",
              "style_object", "action_animal", "action_animal", "texture_object", "texture_object")
    names = ("Color-I", "Color-II", "Background-I", "Background-II", "Style-I", "Style-II", "Action-I",
             "Action-II", "Texture-I", "Texture-II")
    return {n: Task(n, i + 1, THEMES[t]) for i, (n, t) in enumerate(zip(names, themes))}


TASKS: Mapping[str, Task] = MappingProxyType(_tasks())
"""Task name -> :class:`Task`, in the reference's order (task ids 1..10)."""


def get_task(name: str) -> Task:
    """The task named ``name``: ``"Color-I"``, or VL-ICL's spelling ``"color_I"``."""
    theme, sep, level = name.rpartition("_")
    canonical = f"{theme.capitalize()}-{level}" if sep and "-" not in name else name
    if canonical not in TASKS:
        raise ValueError(f"cobsat: unknown task {name!r}; tasks: {', '.join(TASKS)}")
    return TASKS[canonical]


def image_relpath(theme: Theme | str, attribute: str, obj: str) -> str:
    """Where the release keeps the image of (``attribute``, ``obj``):
    ``datasets/{attr_type}_{obj}/{attr}_{obj}.jpg`` (raw values: ``3d``, ``park``)."""
    theme = THEMES[theme] if isinstance(theme, str) else theme
    return f"datasets/{theme.attribute}_{obj}/{attribute}_{obj}.jpg"
