"""``--check``'s cost (:mod:`icl.run.planning.check`, item 6): the wall time each model will take, and
for HTTP models the tokens, images and money their requests take. Nothing here calls an API
except ``--calibrate``, which runs models for real on purpose.

**Time.** Per model with items remaining: ``load_s + model seconds per item x items to ask +
scoring seconds per item x items remaining``, ``load_s`` the seconds the latest run took to load
the model (:meth:`icl.store.Store.load_seconds`), the seconds per item the means over its
measured items (:meth:`icl.store.Store.model_seconds`: ``ok`` scores answered by a model call),
and the items to ask those whose answer the store does not hold yet (:func:`stored_answers`: a
finished run judged by a new judge reuses every answer, so its model is neither loaded nor
asked, and only the new judge's work is estimated); per judge the
same over the items it has still to judge (every model's), ``seconds_per_item`` its judging
seconds per item it was asked about (:meth:`icl.store.Store.judge_seconds`). The plan's time is
their sum. Each is read (:func:`time_estimate`, :func:`judge_time_estimate`) from

1. the compute the user's store already holds for that model identity: basis
   ``stored compute of n items``; else
2. with ``--calibrate N`` (:func:`calibrate`): a real run of the model's first N remaining items,
   in plan order (those the run would ask it first), by the run's own engine
   (:class:`icl.run.execution.engine.Engine`: loading, batches of its ``batch_size``, the guard, follow-ups,
   judges, scoring, the helper processes of the benchmark) into a scratch store in a temporary
   folder, removed afterwards, read back with the same two functions: basis
   ``calibrated on n items``. The user's store and output folder receive nothing of it; its
   answers are not kept (the run asks again). A check killed while it calibrates (SIGKILL)
   cannot remove its scratch folder: the next check does (:func:`remove_stale_scratch`: only
   folders a calibration of this host made, whose process is gone). N items make ``ceil(N / batch_size)`` batches: with
   N below the model's ``batch_size`` the one batch is partial and its time per item overestimates
   a batched model's (a warning says so). A model whose calibration fails to load or fails
   its whole first batch is a problem (``check`` ``calibrate``): the run would stop it the same
   way. Judges are loaded and asked as in the run, and one without stored compute is estimated
   from the scratch store too (when every model's time is known, the first model with items
   remaining runs for the judges' sake, its estimate kept); ``--ray`` workers are not started:
   the calibration runs in the checking process, on ``--device``;
3. else unknown.

**HTTP cost** (:func:`http_cost`; families ``openai`` and ``openai-images``, models only: a
judge's requests depend on the answers). Over the requests the run will send for the model's
remaining items (each built as the run builds it; a request whose answer the store already
holds for this model identity is reused, not sent, and not counted; retries are not counted):

- requests, images sent (every image of a chat request; the input images of an edit), images
  to generate (one per ``openai-images`` request), output tokens at most (``max_new_tokens``
  of every chat request);
- input tokens, an estimate (no provider tokenizer is available offline, and a request carries
  no token count): text ``ceil(characters / 4)`` per message (OpenAI's rule of thumb of about
  4 characters per English token), plus 3 tokens per message and 3 per request (OpenAI's count
  of the chat format's overhead: role and separators, the reply's priming); a chat image by
  OpenAI's documented vision rule: ``detail=low`` 85 tokens, else (``high``, ``auto``, not sent)
  the image scaled down to fit 2048 x 2048, then its short side down to 768, and
  ``85 + 170 x`` its 512-pixel tiles (an upper bound for ``auto``); an ``openai-images`` prompt
  is the text sent (the text parts joined) at the same 4 characters per token. A server running
  another model (vLLM, SGLang) tokenises its own way;
- follow-up turns (two-pass chain of thought: :meth:`icl.benchmarks.base.Benchmark.followup`)
  built with an empty stand-in answer and counted with that answer at its longest
  (``max_new_tokens`` tokens more input), since it is quoted back;
- money, when the model has prices (model arguments, execution arguments: never part of its
  identity): ``price_in`` per 1M input tokens, ``price_out`` per 1M output tokens (at their
  maximum), ``price_image`` per image: every image sent to an edit and every image generated,
  and, when given, every image of a chat request instead of its tokens (chat images are
  otherwise priced as input tokens at ``price_in``). A price not given counts as 0.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import socket
import stat
import tempfile
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from icl.run.planning.check_parts import UNKNOWN_COST, Problem, duration_text, hub_offline, text_table
from icl.run.planning.plan import SETTLED

# adapters whose requests are priced (class anywhere in the adapter's MRO -> family)
HTTP_FAMILIES = {"icl.models.t2i.openai_images.OpenAIImages": "openai-images",
                 "icl.models.vlm.openai.OpenAIChat": "openai"}
CHARS_PER_TOKEN = 4  # OpenAI's rule of thumb for English text
MESSAGE_TOKENS = 3  # per chat message: its role and separators (OpenAI's count for its chat models)
REPLY_TOKENS = 3  # per chat request: the priming of the reply
IMAGE_BASE_TOKENS, IMAGE_TILE_TOKENS, IMAGE_TILE = 85, 170, 512  # OpenAI's vision pricing
IMAGE_FIT, IMAGE_SHORT_SIDE = 2048, 768
PER_MILLION = 1_000_000
REQUEST_CHUNK = 256  # requests built (images read) and looked up in the store at a time
SCRATCH_PREFIX = "icl-calibrate-"  # a calibration's scratch folder: this, then the host and the process id
CALIBRATE_FIX = ("the model failed when --calibrate ran its first items for real (a scratch store): the run would "
                 "fail the same way; fix what the message says (or check without --calibrate)")


# --- time ----------------------------------------------------------------------------------------
def time_estimate(store: Any, model_id: str, label: str, remaining: int, basis: str = "stored compute of {n}",
                  answered: int = 0) -> dict[str, Any]:
    """The time fields of a model's check.json entry from the compute ``store`` (None: no
    store) holds for ``model_id`` (loaded under ``label``), for ``remaining`` items of which
    ``answered`` have their answer in the store already (:func:`stored_answers`: the run reuses
    it, so they cost their scoring only, and a model with every answer stored is never loaded);
    ``estimate_basis`` is ``basis`` with ``{n}`` the items measured."""
    n, model_s, score_s = store.model_seconds(model_id) if store is not None else (0, 0.0, 0.0)
    asked = max(0, remaining - answered)
    load_s = (store.load_seconds(model_id, label) or 0.0) if n and asked else 0.0
    out = _estimate(n, model_s, load_s, asked, basis)
    out["answers_stored"] = answered
    if n and remaining:
        total = out["estimated_s"] + score_s / n * remaining
        described = out["estimate_basis"] + (f"; {answered} answer{'s' if answered != 1 else ''} stored, only scored"
                                             if answered else "")
        out.update(seconds_per_item=(model_s + score_s) / n, estimated_s=total,
                   estimate=f"{duration_text(total)} ({described})")
    return out


def stored_answers(store: Any, bench: Any, model: Any, todo: Sequence[Any], model_id: str) -> int:
    """How many of the items ``todo`` have the answer to their request stored for ``model_id``
    (``ok``, or an overflow: a result, never asked again), which the run reuses without asking
    the model: a finished run judged anew asks only its new judge. Only the items an earlier run
    linked to an answer of the model (the store's links) are candidates; their requests are
    built as the run builds them, :data:`REQUEST_CHUNK` at a time, and looked up by their cache
    key (a request that changed since is asked again, and not counted)."""
    if store is None or not todo or not store.answer_bytes(model_id)[0]:
        return 0
    from icl.models.requests import content_hash

    linked = store.links([it.key for it in todo], model_id)
    candidates = [it for it in todo if "answer:0" in linked.get(it.key, {})]
    found = 0
    for start in range(0, len(candidates), REQUEST_CHUNK):
        hashes = []
        for item in candidates[start:start + REQUEST_CHUNK]:
            try:
                hashes.append(content_hash(bench.request(item, model.privileged)))
            except Exception:  # the run records it as a data failure of the item
                continue
        stored = store.responses(hashes, model_id) if hashes else {}
        found += sum(1 for r in stored.values() if r.status == "ok" or r.reason == "overflow")
    return found


def judge_time_estimate(store: Any, judge_id: str, label: str, remaining: int,
                        basis: str = "stored compute of {n}") -> dict[str, Any]:
    """The time fields of a judge's check.json entry: its judging seconds per item judged
    (:meth:`icl.store.Store.judge_seconds`) for the ``remaining`` items it has still to judge
    (over every model), plus its load, as :func:`time_estimate` does for a model."""
    n, seconds, load = store.judge_seconds(judge_id, label) if store is not None else (0, 0.0, None)
    return _estimate(n, seconds, (load or 0.0) if n and remaining else 0.0, remaining, basis)


def _estimate(n: int, seconds: float, load_s: float, remaining: int, basis: str) -> dict[str, Any]:
    if not n:
        return dict(seconds_per_item=None, measured_items=0, load_s=None, estimated_s=None, estimate=UNKNOWN_COST,
                    estimate_basis=None)
    per_item = seconds / n
    total = load_s + per_item * remaining
    described = basis.format(n=f"{n} item{'s' if n != 1 else ''}")
    return dict(seconds_per_item=per_item, measured_items=n, load_s=load_s, estimated_s=total,
                estimate=f"{duration_text(total)} ({described})", estimate_basis=described)


def calibrate(config: Any, bench: Any, device: str, declared_only: bool, models: Sequence[Any],
              judges: Sequence[Any], works: dict[str, Any], entries: dict[str, dict[str, Any]],
              problems: list[Problem], warnings: list[str]) -> dict[str, Any]:
    """``--calibrate N``: run the first N remaining items of every model whose time is unknown
    (no stored compute) for real into a scratch store and estimate from it (the module
    docstring); a judge whose time is unknown is measured on those items (on the first model
    with items remaining when every model's time is known, its own estimate kept); updates
    ``entries``, appends to ``problems`` and ``warnings``; returns check.json's ``calibration``."""
    n = int(config.calibrate)
    out: dict[str, Any] = dict(items_per_model=n, models=[], judges=[], seconds=0.0, skipped={})
    unknown = [m for m in models if works[m.label].todo and entries[m.label].get("estimated_s") is None]
    unjudged = [j for j in judges if entries[j.label].get("items_remaining")
                and entries[j.label].get("estimated_s") is None]
    blocked = _blocked(declared_only, config, problems)

    def problem_of(m: Any) -> Optional[str]:
        return blocked or next((f"its problem above ({p.check})" for p in problems if p.where == f"model {m.label}"),
                               None)

    targets = []
    for m in unknown:
        why = problem_of(m)
        if why is None:
            targets.append(m)
        else:
            out["skipped"][m.label] = why
            entries[m.label].update(estimate=f"unknown (not calibrated: {why})")
    judged_only = None  # a model run only for the judges' sake: its stored estimate stays
    if unjudged and not targets:
        judged_only = next((m for m in models if works[m.label].todo and problem_of(m) is None), None)
        targets = [judged_only] if judged_only is not None else []
    if unjudged and not targets:
        why = blocked or "no model with items remaining can run"
        for j in unjudged:
            out["skipped"][j.label] = why
            entries[j.label].update(estimate=f"unknown (not calibrated: {why})")
    if not targets:
        return out
    t0 = time.perf_counter()
    judge_todo = {j.label: entries[j.label]["items_remaining"] for j in unjudged}
    try:
        measured, judged = _scratch_run(config, bench, device, targets, judges, works, n, judge_todo)
    except Exception as exc:  # the engine records item failures itself: this is the scratch store or folder
        from icl.run.execution.engine import short_trace

        problems.append(Problem("calibrate", "--calibrate", f"the calibration stopped: {short_trace(exc)}",
                                "see the message (the scratch store lies in the system's temporary folder: "
                                "$TMPDIR)"))
        return out
    out["seconds"] = time.perf_counter() - t0
    for m in targets:
        result = measured[m.label]
        e = entries[m.label]
        out["models"].append(m.label)
        if result["stopped"]:
            problems.append(Problem("calibrate", f"model {m.label}", result["stopped"], CALIBRATE_FIX))
            if m is not judged_only:
                e.update(estimate=f"unknown (its calibration failed: {result['stopped']})")
            continue
        if m is judged_only:
            e.update(calibrated_items=result["items"], calibration_s=result["seconds"], calibrated_for="judges")
            continue
        e.update(calibrated_items=result["items"], calibration_s=result["seconds"])
        batch = max(1, int(getattr(m.adapter, "batch_size", 1) or 1))
        if len(result["items"]) < min(batch, len(works[m.label].todo)):
            warnings.append(f"--calibrate: model {m.label}: calibrated on {len(result['items'])} item(s), fewer than "
                            f"its batch size {batch}: the time per item of a partial batch overestimates a batched "
                            f"model's (--calibrate {batch} fills one batch)")
        if result["failed"]:
            warnings.append(f"--calibrate: model {m.label}: {len(result['failed'])} of its {len(result['items'])} "
                            f"items failed (first: {result['failed'][0]})")
        estimate = result["estimate"]
        if not estimate["measured_items"]:
            e.update(estimate="unknown (its calibration measured no item: each failed or was answered without a "
                              "model call)")
            continue
        e.update(estimate)
    for label, estimate in judged.items():
        out["judges"].append(label)
        if not estimate["measured_items"]:
            entries[label].update(estimate="unknown (its calibration judged no item: every answer failed before "
                                           "the judge)")
            continue
        entries[label].update(estimate)
    return out


def _blocked(declared_only: bool, config: Any, problems: Sequence[Problem]) -> Optional[str]:
    """Why no model can be calibrated, or None."""
    if declared_only:
        return f"--device {config.device} is checked as declared, not seen: the models cannot run here"
    if any(p.check == "device" for p in problems):
        return "the device has a problem"
    if any(p.check == "judges" or p.where.startswith("judge ") for p in problems):
        return "a judge has a problem (the answers could not be scored)"
    return None


def _scratch_run(config: Any, bench: Any, device: str, targets: Sequence[Any], judges: Sequence[Any],
                 works: dict[str, Any], n: int, judge_todo: dict[str, int]
                 ) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Each target model's first ``n`` remaining items through the run's engine into a scratch
    store in a temporary folder (removed); per model label: ``items`` (their keys), ``seconds``
    (the calibration's wall time), ``stopped`` (why the engine stopped the model, or None),
    ``failed`` (messages of its failed items) and ``estimate`` (:func:`time_estimate` on the
    scratch store for the model's remaining items); per label of ``judge_todo`` (a judge -> the
    items it has still to judge): its :func:`judge_time_estimate` on the scratch store."""
    from icl import helpers
    from icl.run.execution.compute import ComputeMeter
    from icl.run.execution.device import eval_device
    from icl.run.execution.engine import Engine
    from icl.store import Store

    where = eval_device(device, config.evaluate)
    pools = list(bench.helper_pools(where is None))
    helpers.settle_guesses(pools)  # as a run starts them: their imports overlap the loading, not the items
    for name in pools:
        helpers.warm(name)
    out: dict[str, dict[str, Any]] = {}
    scratch = Path(tempfile.mkdtemp(prefix=scratch_prefix()))
    try:
        with Store(scratch / "store.sqlite") as store, hub_offline():  # hf: references stay resolved from the cache
            run_id = store.start_run(dict(config=config.resolved(), protocol=bench.protocol, calibrate=n))
            for m in [*targets, *judges]:
                store.put_model(m.model_id, m.label, m.identity)
            meter = ComputeMeter(device, trace_memory=config.trace_memory)
            try:
                for m in targets:
                    items = works[m.label].todo[:n]
                    t0 = time.perf_counter()
                    Engine(bench, [m], judges, store, run_id, meter, device, where, config.overlap,
                           progress=False).run(items)
                    out[m.label] = dict(items=[it.key for it in items], seconds=time.perf_counter() - t0,
                                        stopped=m.stopped)
            finally:
                store.add_compute(meter.records(run_id))
                meter.close()
            failures = store.failures(run_id)
            for m in targets:
                keys = set(out[m.label]["items"])
                out[m.label]["failed"] = [f.message for f in failures if f.model == m.label or
                                          (f.model is None and f.item in keys)]
                out[m.label]["estimate"] = time_estimate(store, m.model_id, m.label, len(works[m.label].todo),
                                                         basis="calibrated on {n}")
            judged = {j.label: judge_time_estimate(store, j.model_id, j.label, judge_todo[j.label],
                                                   basis="calibrated on {n}") for j in judges if j.label in judge_todo}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return out, judged


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"


def scratch_prefix() -> str:
    """The name a calibration's scratch folder starts with: :data:`SCRATCH_PREFIX`, this host and
    this process id (a folder whose process is gone is stale: :func:`remove_stale_scratch`)."""
    return f"{SCRATCH_PREFIX}{_host()}-{os.getpid()}-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale_scratch(root: Optional[Path] = None) -> list[Path]:
    """Remove the scratch folders of calibrations whose process died before removing its own
    (SIGKILL, a node lost) in ``root`` (the system's temporary folder: ``$TMPDIR``); returns
    them. Only what a calibration makes is touched: a folder (not a link) of this user named
    :func:`scratch_prefix` by this host (a ``$TMPDIR`` shared by nodes holds other hosts' live
    ones) and a process id no process has now."""
    root = Path(root if root is not None else tempfile.gettempdir())
    pattern = re.compile(rf"{re.escape(SCRATCH_PREFIX)}{re.escape(_host())}-(\d+)-[a-z0-9_]+")
    removed: list[Path] = []
    try:
        candidates = list(root.glob(f"{SCRATCH_PREFIX}*"))
    except OSError:
        return removed
    for path in candidates:
        found = pattern.fullmatch(path.name)
        if found is None or int(found.group(1)) == os.getpid() or _alive(int(found.group(1))):
            continue
        try:
            info = path.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            continue
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            removed.append(path)
    return removed


# --- HTTP cost -------------------------------------------------------------------------------------
def http_family(adapter: Any) -> Optional[str]:
    """``openai`` or ``openai-images`` (:data:`HTTP_FAMILIES`) for an adapter of those families, else None."""
    for cls in type(adapter).__mro__:
        family = HTTP_FAMILIES.get(f"{cls.__module__}.{cls.__qualname__}")
        if family:
            return family
    return None


def text_tokens(text: str) -> int:
    """The estimated tokens of ``text``: ``ceil(characters / 4)``."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def image_tokens(height: int, width: int, detail: Optional[str]) -> int:
    """OpenAI's documented input tokens of an image: ``low`` 85; else the image scaled down to
    fit 2048 x 2048, then its short side down to 768, 85 + 170 per 512-pixel tile."""
    if detail == "low":
        return IMAGE_BASE_TOKENS
    h, w = float(height), float(width)
    fit = min(1.0, IMAGE_FIT / max(h, w))
    h, w = h * fit, w * fit
    short = min(1.0, IMAGE_SHORT_SIDE / min(h, w))
    h, w = h * short, w * short
    return IMAGE_BASE_TOKENS + IMAGE_TILE_TOKENS * math.ceil(h / IMAGE_TILE) * math.ceil(w / IMAGE_TILE)


def chat_tokens(request: Any, detail: Optional[str], suffix: Optional[str]) -> tuple[int, int, int]:
    """(text tokens, image tokens, images) of a ChatRequest as the ``openai`` adapter sends it
    (its ``suffix`` appended to a last user turn)."""
    import numpy as np

    text = images = pictures = 0
    last = len(request.messages) - 1
    for i, message in enumerate(request.messages):
        words = "".join(p for p in message.content if isinstance(p, str))
        if i == last and message.role == "user" and suffix:
            words += suffix
        text += MESSAGE_TOKENS + text_tokens(words)
        for p in message.content:
            if isinstance(p, np.ndarray):
                pictures += 1
                images += image_tokens(p.shape[0], p.shape[1], detail)
    return text + REPLY_TOKENS, images, pictures


def http_cost(store: Any, bench: Any, model: Any, todo: Sequence[Any], model_id: str) -> dict[str, Any]:
    """``{"http": {...}}`` for a model of an HTTP family (the module docstring), else ``{}``:
    what its remaining items ``todo`` send, the store (read-only, or None) asked which
    requests it already answers for ``model_id``. Requests are built :data:`REQUEST_CHUNK`
    items at a time, so their images are never all in memory."""
    family = http_family(model.adapter)
    if family is None:
        return {}
    from icl.models.requests import ChatRequest, GenerationRequest, content_hash
    from icl.models.t2i.common import prompt_text
    from icl.run.execution.engine import MAX_STEPS

    adapter = model.adapter
    detail, suffix = getattr(adapter, "detail", None), getattr(adapter, "suffix", None)
    c = dict(requests=0, cached=0, unbuilt=0, followups=0, followups_unknown=0, text_tokens=0, image_tokens=0,
             chat_images=0, edit_images=0, output_tokens_max=0, images_generated=0)

    def count(request: Any, quoted: int) -> None:
        c["requests"] += 1
        if isinstance(request, ChatRequest):
            text, image, pictures = chat_tokens(request, detail, suffix)
            c["text_tokens"] += text + quoted
            c["image_tokens"] += image
            c["chat_images"] += pictures
            c["output_tokens_max"] += request.max_new_tokens
        elif isinstance(request, GenerationRequest):
            c["text_tokens"] += text_tokens(prompt_text(request)) + quoted
            c["edit_images"] += len(request.images)
            c["images_generated"] += 1

    for start in range(0, len(todo), REQUEST_CHUNK):
        built = []
        for item in todo[start:start + REQUEST_CHUNK]:
            try:
                request = bench.request(item, model.privileged)
            except Exception:  # the run records it as a data failure of the item (the check lists data failures)
                c["unbuilt"] += 1
                continue
            built.append((item, request, content_hash(request)))
        stored = store.responses([h for _, _, h in built], model_id) if store is not None and built else {}
        reused = {h for h, r in stored.items() if r.status == "ok" or r.reason in SETTLED}  # as the engine does
        for item, request, digest in built:
            if digest in reused:
                c["cached"] += 1
                continue
            count(request, 0)
            answers: list[Any] = []
            previous = request
            for _ in range(MAX_STEPS - 1):  # follow-ups, each answer an empty stand-in (text answers only)
                if not isinstance(previous, ChatRequest):
                    break
                answers.append("")
                try:
                    follow = bench.followup(item, list(answers))
                except Exception:
                    c["followups_unknown"] += 1
                    break
                if follow is None:
                    break
                c["followups"] += 1
                count(follow, _max_tokens(previous))  # the answer it follows, at its longest
                previous = follow
    prices = {name: getattr(adapter, name, None) for name in ("price_in", "price_out", "price_image")}
    out = dict(family=family, requests=c["requests"], cached=c["cached"], unbuilt=c["unbuilt"],
               followups=c["followups"], followups_unknown=c["followups_unknown"],
               input_tokens=c["text_tokens"] + c["image_tokens"], text_tokens=c["text_tokens"],
               image_tokens=c["image_tokens"], images_sent=c["chat_images"] + c["edit_images"],
               output_tokens_max=c["output_tokens_max"], images_generated=c["images_generated"], prices=prices,
               money=money(c, prices), tokens_counted="estimate: ceil(characters / 4) + 3 per message + 3 per "
                                                     "request; chat images by OpenAI's tile rule")
    return {"http": out}


def _max_tokens(request: Any) -> int:
    return int(getattr(request, "max_new_tokens", 0) or 0)


def money(counts: dict[str, int], prices: dict[str, Optional[float]]) -> Optional[float]:
    """The price of the counted requests (the module docstring), or None without any price."""
    if all(p is None for p in prices.values()):
        return None
    p_in, p_out, p_image = (prices.get(k) or 0.0 for k in ("price_in", "price_out", "price_image"))
    per_image = prices.get("price_image") is not None
    tokens_in = counts["text_tokens"] + (0 if per_image else counts["image_tokens"])
    images = counts["edit_images"] + counts["images_generated"] + (counts["chat_images"] if per_image else 0)
    return p_in * tokens_in / PER_MILLION + p_out * counts["output_tokens_max"] / PER_MILLION + p_image * images


def _money(value: float) -> str:
    return f"{value:,.2f}" if value >= 1 or value == 0 else f"{value:.4g}"  # cents of a small run still show


# --- the report --------------------------------------------------------------------------------------
def render_cost(report: dict[str, Any]) -> list[str]:
    """The lines of the check's text about cost beyond the models table: the calibration, and
    one table of the HTTP models' requests."""
    lines = []
    calibration = report.get("calibration")
    if calibration and calibration.get("models"):
        judged = calibration.get("judges")
        lines.append(f"calibration: the first {calibration['items_per_model']} remaining item(s) of "
                     f"{', '.join(calibration['models'])} run for real in a scratch store (removed) in "
                     f"{calibration['seconds']:.1f} s" + (f", judged by {', '.join(judged)}" if judged else ""))
    for label, why in (calibration or {}).get("skipped", {}).items():
        lines.append(f"calibration: {label} not calibrated: {why}")
    http = [(e["label"], e["http"]) for e in report.get("models", []) if e.get("http")]
    if not http:
        return lines
    rows = [("HTTP model", "requests", "reused", "input tokens (est.)", "images sent", "output tokens (max)",
             "images to generate", "cost")]
    for label, h in http:
        rows.append((label, f"{h['requests']:,}", f"{h['cached']:,}", f"{h['input_tokens']:,}", f"{h['images_sent']:,}",
                     f"{h['output_tokens_max']:,}", f"{h['images_generated']:,}",
                     "-" if h["money"] is None else _money(h["money"])))
    lines += text_table(rows, right=(1, 2, 3, 4, 5, 6, 7))
    lines.append("  input tokens: an estimate (4 characters a token, 3 per message and request; chat images by "
                 "OpenAI's tile rule); cost: price_in / price_out per 1M tokens, price_image per image (a price not "
                 "given counts as 0; output at its maximum)")
    return lines
