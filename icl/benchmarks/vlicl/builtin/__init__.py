"""Built-in procedural versions of the ten VL-ICL tasks, in the release's record layout.

Every record is drawn from its own generator, ``derive_seed("vlicl-builtin", task, split, index,
"record")``, so a record never depends on how many others are made; images are scene descriptions
drawn on demand (:class:`~icl.benchmarks.vlicl.records.SceneImages`). The data is the same for
every evaluation seed (seeds change the support sets, as with the release).

What each task draws: MiniImageNet-like tasks use flat shapes (the object classes) under nonsense
names; CLEVR-like scenes have known counts per attribute; TextOCR puts words on a page with one in
a red box; operator induction renders ``a ? b`` (or the two digits apart); the text-to-image tasks
show shapes, counts of shapes and coloured shapes; the ``cobsat`` task takes CoBSAT's own
vocabularies, tasks and CoBSAT-lite drawings (:mod:`icl.benchmarks.cobsat.vocab`,
:func:`icl.benchmarks.cobsat.lite.draw`: one source for both protocols), its drawable tasks in
VL-ICL's spelling (``color_I`` ...).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from icl.benchmarks.cobsat import lite as cobsat_lite
from icl.benchmarks.cobsat.vocab import TASKS as COBSAT, VOCAB, display, get_task as get_cobsat_task
from icl.benchmarks.vlicl.builtin.draw import BACKGROUNDS, COLOURS, NUMBER_WORDS, PLURALS, SHAPES, Obj, place
from icl.benchmarks.vlicl.builtin.scenes import (CLEVR_SHAPES, LARGE, SMALL, ObjectScene, TextScene, WordsScene,
                                                 clevr_size, words_layout)
from icl.benchmarks.vlicl.records import SceneImages, TaskData
from icl.benchmarks.vlicl.tasks import PER_CLASS, get_task
from icl.data.seeds import rng as seeded_rng

GENERATOR_VERSION = "2"  # 2: cobsat from CoBSAT's vocabularies and CoBSAT-lite drawings
SEED = "vlicl-builtin"
NAMES = ("dax", "blicket", "perpo", "shously", "slation", "wug", "tufa", "zorb", "fep", "kiki", "mipa", "gazzer")
OBJECT_SIZE = (96, 96)


def image_size(task: str) -> tuple[int, int]:
    """The size a built-in text-to-image task asks a generator for: its drawings' size."""
    return (cobsat_lite.SIZE, cobsat_lite.SIZE) if task == "cobsat" else OBJECT_SIZE
# CoBSAT's drawable tasks in VL-ICL's spelling ("Color-I" -> "color_I"), in CoBSAT's order
COBSAT_TASKS = tuple(f"{n.split('-')[0].lower()}_{n.split('-')[1]}" for n, t in COBSAT.items() if t.theme.drawable)
SYLLABLES = ("ka", "lo", "mi", "ru", "te", "sa", "no", "vi", "de", "po", "ja", "xu", "be", "fi", "go", "ze")


def _rng(task: str, split: str, index: int | str) -> np.random.Generator:
    return seeded_rng(SEED, task, split, str(index), "record")


def _pick(rng: np.random.Generator, values: tuple[str, ...] | list[str], n: int = 1) -> list[str]:
    return [values[i] for i in rng.choice(len(values), n, replace=False)]


def _odd(rng: np.random.Generator, lo: int, hi: int) -> int:
    return int(rng.integers(lo // 2, hi // 2 + 1)) * 2 + 1


class _Builder:
    def __init__(self, task: str) -> None:
        self.task = task
        self.images = SceneImages()

    def ref(self, split: str, name: str, scene: Any) -> str:
        return self.images.add(f"builtin/{self.task}/{split}/{name}.png", scene)

    def single(self, rng: np.random.Generator, split: str, name: str, shape: str, colour: str | None = None,
               background: str | None = None) -> str:
        """One object of ``shape`` (random colour, size, place and background unless given)."""
        s = _odd(rng, 21, 45)
        (x, y), = place(rng, OBJECT_SIZE, [s])
        colour = colour or _pick(rng, tuple(COLOURS))[0]
        background = background or _pick(rng, tuple(BACKGROUNDS))[0]
        return self.ref(split, name, ObjectScene(OBJECT_SIZE, background, (Obj(shape, colour, x, y, s),)))

    def several(self, rng: np.random.Generator, split: str, name: str, shapes: list[str],
                colours: list[str] | None = None, background: str = "white") -> str:
        sizes = [_odd(rng, 13, 21) for _ in shapes]
        corners = place(rng, OBJECT_SIZE, sizes)
        colours = colours or _pick(rng, tuple(COLOURS), 1) * len(shapes)
        objs = tuple(Obj(sh, c, x, y, s) for sh, c, (x, y), s in zip(shapes, colours, corners, sizes))
        return self.ref(split, name, ObjectScene(OBJECT_SIZE, background, objs))


def _image_rng(b: _Builder, i: int, name: str, j: int) -> np.random.Generator:
    """Each support image its own generator: the first k images of a class never depend on how
    many a class has (many-shot data extends, never reshuffles)."""
    return _rng(b.task, "support", f"q{i}/{name}/{j}")


def _open_mi(b: _Builder, i: int, per_class: int, t2i: bool) -> dict[str, Any]:
    rng = _rng(b.task, "query", i)
    shapes = _pick(rng, SHAPES, 2)
    names = _pick(rng, NAMES, 2)
    k = int(rng.integers(2))
    support = {n: {"images": [b.single(_image_rng(b, i, n, j), "support", f"q{i}_{n}_{j}", sh)
                              for j in range(per_class)], "real_name": sh} for n, sh in zip(names, shapes)}
    rec: dict[str, Any] = {"id": f"q{i}", "classes": names, "support": support, "real_name": shapes[k]}
    if t2i:
        rec.update(question=f"Generate a {names[k]}", task_label=names[k], answer=shapes[k])
    else:
        rec.update(image=[b.single(rng, "query", f"q{i}", shapes[k])], question="This is a", answer=names[k])
    return rec


def _count_phrase(n: int, shape: str) -> str:
    return f"{NUMBER_WORDS[n]} {shape if n == 1 else PLURALS[shape]}"


def _fast_count(b: _Builder, i: int, per_class: int) -> dict[str, Any]:
    rng = _rng(b.task, "query", i)
    counts = [int(c) for c in rng.choice(np.arange(1, 5), 2, replace=False)]
    names = _pick(rng, NAMES, 2)
    k = int(rng.integers(2))
    support = {}
    for n, c in zip(names, counts):
        images, captions = [], []
        for j in range(per_class):
            g = _image_rng(b, i, n, j)
            shape = _pick(g, SHAPES)[0]
            images.append(b.several(g, "support", f"q{i}_{n}_{j}", [shape] * c))
            captions.append(f"{n} {PLURALS[shape]}")
        support[n] = {"images": images, "captions": captions, "real_name": NUMBER_WORDS[c]}
    shape = _pick(rng, SHAPES)[0]
    return {"id": f"q{i}", "classes": names, "support": support, "task_label": names[k],
            "question": f"Generate {names[k]} {PLURALS[shape]}", "answer": _count_phrase(counts[k], shape)}


def _fast_attr(b: _Builder, i: int, per_class: int) -> dict[str, Any]:
    rng = _rng(b.task, "query", i)
    colours = _pick(rng, tuple(COLOURS), 2)
    names = _pick(rng, NAMES, 2)
    k = int(rng.integers(2))
    support = {}
    for n, c in zip(names, colours):
        images, captions = [], []
        for j in range(per_class):
            g = _image_rng(b, i, n, j)
            shape = _pick(g, SHAPES)[0]
            images.append(b.single(g, "support", f"q{i}_{n}_{j}", shape, colour=c))
            captions.append(f"{n} {shape}")
        support[n] = {"images": images, "captions": captions, "real_name": c}
    shape = _pick(rng, SHAPES)[0]
    return {"id": f"q{i}", "classes": names, "support": support, "task_label": names[k],
            "question": f"Generate a {names[k]} {shape}", "answer": f"{colours[k]} {shape}"}


def _clevr(b: _Builder, split: str, i: int) -> dict[str, Any]:
    rng = _rng(b.task, split, i)
    n = int(rng.integers(3, 8))
    sizes = [SMALL if rng.random() < 0.5 else LARGE for _ in range(n)]
    corners = place(rng, (128, 128), sizes)
    objs = tuple(Obj(_pick(rng, tuple(CLEVR_SHAPES))[0], _pick(rng, tuple(COLOURS))[0], x, y, s,
                     metal=bool(rng.random() < 0.5)) for (x, y), s in zip(corners, sizes))
    ref = b.ref(split, f"{split}{i}", ObjectScene((128, 128), "white", objs, clevr=True))
    attr = _pick(rng, ("shape", "color", "size", "material"))[0]
    value_of: dict[str, Callable[[Obj], str]] = {
        "shape": lambda o: CLEVR_SHAPES[o.shape], "color": lambda o: o.colour,
        "size": clevr_size, "material": lambda o: "metal" if o.metal else "rubber"}
    value = value_of[attr](objs[int(rng.integers(n))])
    count = sum(value_of[attr](o) == value for o in objs)
    return {"id": f"{split}{i}", "image": [ref], "question": f"{attr}: {value}", "answer": count}


def _operator(b: _Builder, split: str, i: int, interleaved: bool) -> dict[str, Any]:
    rng = _rng(b.task, split, i)
    a, c = (int(v) for v in rng.integers(0, 10, 2))
    if interleaved:
        image = [b.ref(split, f"{split}{i}_a", TextScene((64, 64), str(a))),
                 b.ref(split, f"{split}{i}_b", TextScene((64, 64), str(c)))]
        question = "What is the result of the two numbers?"
    else:
        image = [b.ref(split, f"{split}{i}", TextScene((64, 160), f"{a} ? {c}"))]
        question = "What is the result of the following mathematical expression?"
    results = [a + c, a - c, a * c]
    rec: dict[str, Any] = {"id": f"{split}{i}", "image": image, "question": question}
    if split == "query":
        op = int(rng.integers(3))
        rec.update(operator="+-x"[op], answer=results[op])
    else:
        rec["answer"] = results
    return rec


def _word(rng: np.random.Generator) -> str:
    return "".join(_pick(rng, SYLLABLES, int(rng.integers(2, 4))))


def _textocr(b: _Builder, split: str, i: int) -> dict[str, Any]:
    rng = _rng(b.task, split, i)
    words = tuple(dict.fromkeys(_word(rng) for _ in range(4)))
    size = (128, 192)
    boxed = int(rng.integers(len(words)))
    scene = WordsScene(size, words, words_layout(rng, size, words, 0.5), boxed)
    return {"id": f"{split}{i}", "image": [b.ref(split, f"{split}{i}", scene)],
            "question": "What is the text in the red box?", "answer": words[boxed]}


MATCH_QUESTION = "Are these two images dax?"


def _pair(b: _Builder, rng: np.random.Generator, split: str, name: str, same: bool) -> dict[str, Any]:
    first, other = _pick(rng, SHAPES, 2)
    second = first if same else other
    return {"image": [b.single(rng, split, f"{name}_a", first), b.single(rng, split, f"{name}_b", second)],
            "question": MATCH_QUESTION, "answer": "yes" if same else "no"}


def _matching(b: _Builder, split: str, i: int) -> dict[str, Any]:
    rng = _rng(b.task, split, i)
    if split == "query":
        # Balanced like the release: even queries are same-class pairs.
        return {"id": f"{split}{i}", **_pair(b, rng, split, f"{split}{i}", i % 2 == 0)}
    return {"id": f"{split}{i}", "same": _pair(b, rng, split, f"{split}{i}_same", True),
            "diff": _pair(b, rng, split, f"{split}{i}_diff", False)}


def _concept(field: str, value: str) -> str:
    """What the judge checks, the value as CoBSAT prints it (``3d`` -> ``wireframe``)."""
    return f"{display(value)} background" if field == "background" else display(value)


@dataclass(frozen=True)
class LiteScene:
    """A CoBSAT-lite image (``icl.benchmarks.cobsat.lite``) as a built-in scene."""

    theme: str
    attribute: str
    object: str

    def render(self) -> np.ndarray:
        return np.array(cobsat_lite.draw(self.theme, self.attribute, self.object))

    def caption(self) -> str:
        return cobsat_lite.caption(self.theme, self.attribute, self.object)


def _cobsat_record(b: _Builder, rng: np.random.Generator, split: str, name: str, task: str,
                   latent_value: str | None) -> dict[str, Any]:
    spec = get_cobsat_task(task)
    theme = spec.theme
    # the record's fields are CoBSAT's vocabulary spaces (object or animal, and the attribute)
    latent, given = spec.latent_space, spec.text_space
    values = {latent: latent_value or _pick(rng, VOCAB[latent])[0], given: _pick(rng, VOCAB[given])[0]}
    rec: dict[str, Any] = {"id": name, "task": task, "latent": latent, **values,
                           "question": f"{display(values[given])}: "}
    if split == "support":
        rec["image"] = b.ref(split, name, LiteScene(theme.name, values[theme.attribute], values[theme.object]))
    else:
        rec["answer"] = [_concept(latent, values[latent]), _concept(given, values[given])]
    return rec


def _cobsat_support(b: _Builder, per_value: int) -> list[dict[str, Any]]:
    out = []
    for task in COBSAT_TASKS:
        for value in VOCAB[get_cobsat_task(task).latent_space]:
            for j in range(per_value):
                name = f"{task}_{value}_{j}"
                out.append(_cobsat_record(b, _rng(b.task, "support", name), "support", name, task, value))
    return out


def generate(task: str, queries: int | None = None, support: int | None = None, per_class: int = 5,
             text_only: bool = False) -> TaskData:
    """The built-in version of ``task``: ``queries`` test records (default: the release's test
    size), a support pool of ``support`` records (default: its train size; for CoBSAT the number
    per (task, latent value), by default enough for the train size and at least ``per_class``), and
    ``per_class`` support images per class for per-class tasks."""
    spec = get_task(task)
    nq = spec.test if queries is None else queries
    ns = spec.train if support is None else support
    b = _Builder(task)
    sup: list[dict[str, Any]] = []
    if task in PER_CLASS:
        make = {"open_mi": lambda i: _open_mi(b, i, per_class, False),
                "open_t2i_mi": lambda i: _open_mi(b, i, per_class, True),
                "fast_count_t2i": lambda i: _fast_count(b, i, per_class),
                "fast_attr_t2i": lambda i: _fast_attr(b, i, per_class)}[task]
        qs = [make(i) for i in range(nq)]
    elif task == "cobsat":
        per_value = max(-(-ns // (len(COBSAT_TASKS) * 10)), per_class) if support is None else ns  # 10 latent values
        sup = _cobsat_support(b, per_value)
        qs = []
        for i in range(nq):
            rng = _rng(task, "query", i)
            qs.append(_cobsat_record(b, rng, "query", f"q{i}", _pick(rng, COBSAT_TASKS)[0], None))
    else:
        make2: Callable[[str, int], dict[str, Any]] = {
            "clevr": lambda s, i: _clevr(b, s, i),
            "operator_induction": lambda s, i: _operator(b, s, i, False),
            "operator_induction_interleaved": lambda s, i: _operator(b, s, i, True),
            "textocr": lambda s, i: _textocr(b, s, i),
            "matching_mi": lambda s, i: _matching(b, s, i)}[task]
        qs = [make2("query", i) for i in range(nq)]
        sup = [make2("support", i) for i in range(ns)]
    h = hashlib.sha256(f"vlicl-builtin/{GENERATOR_VERSION}/{task}".encode())
    h.update(json.dumps([qs, sup], sort_keys=True).encode())
    for ref in sorted(b.images.scenes):
        h.update(f"{ref}={b.images.scenes[ref]!r};".encode())
    return TaskData(task, qs, sup, b.images, h.hexdigest(), "builtin", text_only)
