"""``--prompt-style reference``: the single prompt the reference code builds per model family.

Source: ``ys-zong/VL-ICL`` ``utils/model_inference.py`` (``ICL_I2T_inference``, one branch per
engine), ``utils/ICL_utils.py`` (``get_task_instruction``, ``format_answer``), and the
conversation templates it calls (``llava/conversation.py`` of LLaVA / LLaVA-NeXT:
``conv_llava_v1``, ``conv_qwen`` = ``qwen_1_5``). Each layout is one user turn that interleaves
text and images exactly where the reference puts them; an image stands where the reference
writes its image token (LLaVA ``<image>``, OpenFlamingo / Otter ``<image>``, InternLM-XComposer2
``<ImageHere>``, Emu2-Chat ``[<IMG_PLH>]``), its image element
(IDEFICS processor list, GPT-4V ``image_url``), or its path (Qwen-VL ``Picture n: <img>PATH</img>``).

Rendering the request with each image replaced by that token gives, byte for byte, the
reference's prompt string (tests: ``tests/benchmarks/vlicl/test_vlicl_reference.py``). The
layouts that carry their own conversation wrapper (LLaVA, LLaVA-OneVision, Qwen-VL, IDEFICS,
OpenFlamingo, Otter, Emu2-Chat) are meant for ``hf-vlm`` with ``chat_template=raw`` (no second
template); ``internlm-x2`` is the query the reference hands to the model's own ``chat`` method,
which wraps it in the model's template (an adapter applying the checkpoint's chat template);
``gpt4v`` is a plain chat-completions message for ``openai`` with ``detail=low``.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from icl.models.requests import ChatRequest, Part

# conv_llava_v1 (llava/conversation.py): system, sep " ", roles USER / ASSISTANT, SeparatorStyle.TWO
LLAVA_V1_SYSTEM = ("A chat between a curious human and an artificial intelligence assistant. "
                   "The assistant gives helpful, detailed, and polite answers to the human's questions.")
# conv_qwen ("qwen_1_5", used for llava-onevision): SeparatorStyle.CHATML
QWEN_1_5_SYSTEM = "<|im_start|>system\nYou are a helpful assistant."
GPT4V_SUFFIX = "\nEnsure the generated answers only contain the answer to the question and no other information."

Shot = tuple[Sequence[np.ndarray], str, str]  # (images, question, formatted answer)


def _llava_body(instruction: str, shots: Sequence[Shot], query: tuple[Sequence[np.ndarray], str]) -> list[Part]:
    parts: list[Part] = [f"{instruction}\n"]
    for images, question, answer in shots:
        for img in images:
            parts += [img, "\n"]
        parts.append(f"{question}\nAnswer: {answer}\n")
    for img in query[0]:
        parts += [img, "\n"]
    parts.append(f"{query[1]}\nAnswer:")
    return parts


def llava(instruction: str, shots: Sequence[Shot], query: tuple[Sequence[np.ndarray], str]) -> list[Part]:
    """``llava16-7b``: the body in ``conv_llava_v1``: ``"{system} USER: {body} ASSISTANT:"``."""
    return [f"{LLAVA_V1_SYSTEM} USER: "] + _llava_body(instruction, shots, query) + [" ASSISTANT:"]


def llava_onevision(instruction: str, shots: Sequence[Shot], query: tuple[Sequence[np.ndarray], str]) -> list[Part]:
    """``llava-onevision-*``: the same body in ``conv_qwen`` (``qwen_1_5``, ChatML)."""
    return ([f"{QWEN_1_5_SYSTEM}<|im_end|>\n<|im_start|>user\n"] + _llava_body(instruction, shots, query)
            + ["<|im_end|>\n<|im_start|>assistant\n"])


def qwen_vl(instruction: str, shots: Sequence[Shot], query: tuple[Sequence[np.ndarray], str]) -> list[Part]:
    """``qwen-vl`` / ``qwen-vl-chat``: the list format joined by ``tokenizer.from_list_format``
    (each image ``"Picture {n}: <img>{path}</img>\\n"``); no chat wrapper."""
    parts: list[Part] = [f"You are a helpful assistant. {instruction}"]
    n = 0

    def image(img: np.ndarray) -> None:
        nonlocal n
        n += 1
        parts.extend([f"Picture {n}: <img>", img, "</img>\n"])

    for images, question, answer in shots:
        for img in images:
            image(img)
        parts.append(f"User: {question}\nAssistant: {answer}\n")
    for img in query[0]:
        image(img)
    parts.append(f"User: {query[1]}\nAssistant:")
    return parts


def idefics(instruction: str, shots: Sequence[Shot], query: tuple[Sequence[np.ndarray], str]) -> list[Part]:
    """``idefics-*-instruct``: the processor's prompt list (strings and images in order)."""
    parts: list[Part] = [f"You are a helpful assistant.\n{instruction}\n"]
    for images, question, answer in shots:
        parts += list(images)
        parts += [f"\nUser: {question}", f"\nAssistant: {answer}\n"]
    parts += list(query[0])
    parts += [f"\nUser: {query[1]}", "\nAssistant:"]
    return parts


def _chunked(shot: str, last: str) -> Callable[..., list[Part]]:
    """A base interleaved layout: ``"{instruction}\n"``, then per shot its images (each one image
    token) and ``shot`` filled in, then the query's images and ``last``."""
    def build(instruction: str, shots: Sequence[Shot], query: tuple[Sequence[np.ndarray], str]) -> list[Part]:
        parts: list[Part] = [f"{instruction}\n"]
        for images, question, answer in shots:
            parts += list(images)
            parts.append(shot.format(question=question, answer=answer))
        parts += list(query[0])
        parts.append(last.format(question=query[1]))
        return parts
    return build


# ``openflamingo``: ``<image>`` per image, ``<|endofchunk|>`` after each answer
openflamingo = _chunked("{question}\nAnswer: {answer}<|endofchunk|>", "{question}\nAnswer:")
# ``otter-llama``: ``User: ...\nGPT:<answer> ...<|endofchunk|>`` per shot
otter = _chunked("User: {question}\nGPT:<answer> {answer}<|endofchunk|>", "User: {question}\nGPT:<answer>")
# ``internlm-x2`` (the ``'internlm-x' in engine`` branch): ``<ImageHere>`` per image, the query
# string ``model.chat`` receives (the model's own chat wrapper is applied by its code, not VL-ICL's)
internlm_x2 = _chunked("{question}\nAnswer: {answer}\n", "{question}\nAnswer:")
# ``emu2-chat``: ``[<IMG_PLH>]`` per image (Emu2's image placeholder), each shot's text in brackets
# closed by ``].``, the query's opened by ``[`` and left open; ``build_input_ids`` adds no wrapper
emu2_chat = _chunked("[{question}\nAnswer: {answer}].", "[{question}\nAnswer:")


def gpt4v(instruction: str, shots: Sequence[Shot], query: tuple[Sequence[np.ndarray], str]) -> list[Part]:
    """``gpt4v``: one user message of separate content items (kept separate: each ``str`` is one
    ``{"type": "text"}`` item); answers as ``"The answer is X"``; images at ``detail: low`` (the
    ``openai`` adapter's ``detail`` argument)."""
    parts: list[Part] = [f"{instruction}{GPT4V_SUFFIX}"]
    for images, question, answer in shots:
        parts += list(images)
        parts += [question, "The answer is " + answer]
    parts += list(query[0])
    parts.append(query[1] + " The answer is")
    return parts


FAMILIES: dict[str, Callable[..., list[Part]]] = {
    "llava": llava, "llava-onevision": llava_onevision, "qwen-vl": qwen_vl, "idefics": idefics,
    "openflamingo": openflamingo, "otter": otter, "gpt4v": gpt4v, "internlm-x2": internlm_x2, "emu2-chat": emu2_chat,
}
SEPARATE_TEXT = frozenset({"gpt4v"})  # families whose text items stay separate content parts


def merge_text(parts: Sequence[Part]) -> list[Part]:
    """Adjacent strings joined (one text run between images), empty strings dropped."""
    out: list[Part] = []
    for p in parts:
        if isinstance(p, str):
            if not p:
                continue
            if out and isinstance(out[-1], str):
                out[-1] += p
                continue
        out.append(p)
    return out


def reference_request(family: str, request_id: str, instruction: str, shots: Sequence[Shot],
                      query: tuple[Sequence[np.ndarray], str], seed: int, max_new_tokens: int) -> ChatRequest:
    """The reference prompt of ``family`` as a one-turn :class:`ChatRequest`."""
    try:
        build = FAMILIES[family]
    except KeyError:
        raise ValueError(f"unknown reference family {family!r}; families: {', '.join(FAMILIES)}") from None
    parts = build(instruction, shots, query)
    if family not in SEPARATE_TEXT:
        parts = merge_text(parts)
    return ChatRequest.user(request_id, *parts, max_new_tokens=max_new_tokens, min_new_tokens=1, seed=seed)


def render(request: ChatRequest, image: Callable[[int, np.ndarray], str]) -> str:
    """The request's text with image ``i`` (0-based) written as ``image(i, array)``."""
    out, n = [], 0
    for m in request.messages:
        for p in m.content:
            if isinstance(p, np.ndarray):
                out.append(image(n, p))
                n += 1
            else:
                out.append(p)
    return "".join(out)


def format_answer(answer: Any) -> str:
    """The reference's ``format_answer`` then f-string: ``str`` of the answer."""
    return str(answer)
