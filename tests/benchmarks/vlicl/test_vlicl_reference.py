"""``--prompt-style reference`` equals, byte for byte, what the reference code builds.

The expected strings are built here by the rules of ``ys-zong/VL-ICL`` ``utils/model_inference.py``
(``ICL_I2T_inference``: the ``qwen-vl``, ``llava``, ``flamingo``, ``otter``, ``internlm-x``,
``emu2-chat``, ``idefics`` and ``gpt4v`` branches), ``utils/ICL_utils.py`` (``select_demonstration``'s support dicts,
``get_task_instruction``, ``format_answer``), LLaVA's ``llava/conversation.py`` (``conv_llava_v1``:
SeparatorStyle.TWO, ``conv_qwen``/``qwen_1_5``: CHATML) and Qwen-VL's ``tokenization_qwen.py``
(``from_list_format``: ``Picture {n}: <img>{path}</img>\\n``), from the raw release records, not
from the plugin's episode objects: only the choice of support records is taken from the episode.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from icl.benchmarks.vlicl import VLICL
from icl.benchmarks.vlicl.reference import render
from icl.benchmarks.vlicl.tasks import TASKS
from icl.models.vlm.openai import OpenAIChat

I2T_TASKS = ("open_mi", "clevr", "operator_induction", "operator_induction_interleaved", "textocr", "matching_mi")
CONV_LLAVA_V1_SYSTEM = ("A chat between a curious human and an artificial intelligence assistant. "
                        "The assistant gives helpful, detailed, and polite answers to the human's questions.")


# -- the reference's support dicts (select_demonstration) from the raw records ----------------------
def _reference_support(root: Path, task: str, query: dict, episode: Any) -> list[dict]:
    folder = root / task
    support_meta = {str(r.get("id", i)): r for i, r in enumerate(json.loads((folder / "support.json").read_text()))}
    if task == "open_mi":
        out = []
        for d in episode.support:
            cls, i = d.id.rsplit("/", 1)
            out.append({"image": [query["support"][cls]["images"][int(i)]], "answer": cls, "question": "This is a"})
        return out
    if task == "matching_mi":
        out = []
        for d in episode.support:
            rid, side = d.id.rsplit("/", 1)
            out.append(copy.deepcopy(support_meta[rid][side]))
        return out
    out = [copy.deepcopy(support_meta[d.id]) for d in episode.support]
    if task.startswith("operator_induction"):
        idx = {"+": 0, "-": 1, "x": 2}[query["operator"]]
        for s in out:
            s["answer"] = s["answer"][idx]
    return out


def _images(value: Any) -> list[str]:  # load_image: a path or a list of paths
    return [value] if isinstance(value, str) else list(value)


def _format_answer(answer: Any, dataset: str) -> Any:
    if dataset in ["operator_induction", "clevr", "operator_induction_interleaved"]:
        answer = str(answer)
    return answer


# -- the branches of ICL_I2T_inference, images as their reference token/path -------------------------
def ref_llava(instr: str, sup: list[dict], query: dict, dataset: str, conv: str) -> str:
    input_text = f"{instr}\n"
    for s in sup:
        for _ in s["image"]:
            input_text += "<image>\n"
        input_text += f"{s['question']}\nAnswer: {_format_answer(s['answer'], dataset)}\n"
    for _ in _images(query["image"]):
        input_text += "<image>\n"
    input_text += f"{query['question']}\nAnswer:"
    if conv == "llava_v1":  # TWO: system + sep, role + ": " + msg + sep, role + ":"
        return CONV_LLAVA_V1_SYSTEM + " " + "USER" + ": " + input_text + " " + "ASSISTANT" + ":"
    # CHATML: system + sep + "\n", role + "\n" + msg + sep + "\n", role + "\n"
    return ("<|im_start|>system\nYou are a helpful assistant." + "<|im_end|>" + "\n" + "<|im_start|>user" + "\n"
            + input_text + "<|im_end|>" + "\n" + "<|im_start|>assistant" + "\n")


def ref_qwen_vl(instr: str, sup: list[dict], query: dict, dataset: str, data_path: str) -> str:
    inputs = [{"text": f"You are a helpful assistant. {instr}"}]
    for s in sup:
        for p in s["image"]:
            inputs.append({"image": os.path.join(data_path, p)})
        inputs.append({"text": "User: " + s["question"] + "\nAssistant: " + _format_answer(s["answer"], dataset) + "\n"})
    for p in _images(query["image"]):
        inputs.append({"image": os.path.join(data_path, p)})
    inputs.append({"text": "User: " + query["question"] + "\nAssistant:"})
    text, n = "", 0
    for ele in inputs:  # from_list_format
        if "image" in ele:
            n += 1
            text += f"Picture {n}: " + "<img>" + ele["image"] + "</img>" + "\n"
        else:
            text += ele["text"]
    return text


def ref_flamingo(instr: str, sup: list[dict], query: dict, dataset: str) -> str:
    input_text = f"{instr}\n"
    for s in sup:
        for _ in s["image"]:
            input_text += "<image>"
        input_text += f"{s['question']}\nAnswer: {_format_answer(s['answer'], dataset)}<|endofchunk|>"
    for _ in _images(query["image"]):
        input_text += "<image>"
    return input_text + f"{query['question']}\nAnswer:"


def ref_otter(instr: str, sup: list[dict], query: dict, dataset: str) -> str:
    input_text = f"{instr}\n"
    for s in sup:
        for _ in s["image"]:
            input_text += "<image>"
        input_text += f"User: {s['question']}\nGPT:<answer> {_format_answer(s['answer'], dataset)}<|endofchunk|>"
    for _ in _images(query["image"]):
        input_text += "<image>"
    return input_text + f"User: {query['question']}\nGPT:<answer>"


def ref_internlm_x2(instr: str, sup: list[dict], query: dict, dataset: str) -> str:
    """The ``'internlm-x' in engine`` branch of ``ICL_I2T_inference`` (ys-zong/VL-ICL
    utils/model_inference.py, commit 2b77eee6), quoted::

        input_text = f"{task_instruction}\\n"
        ...        input_text += "<ImageHere>"
        input_text += f"{n_shot_support[i]['question']}\\nAnswer: {format_answer(...)}\\n"
        ...        input_text += "<ImageHere>"
        input_text += f"{query_text}\\nAnswer:"
        predicted_answers, history = model.chat(tokenizer, query=input_text, ...)
    """
    input_text = f"{instr}\n"
    for s in sup:
        for _ in s["image"]:
            input_text += "<ImageHere>"
        input_text += f"{s['question']}\nAnswer: {_format_answer(s['answer'], dataset)}\n"
    for _ in _images(query["image"]):
        input_text += "<ImageHere>"
    return input_text + f"{query['question']}\nAnswer:"


def ref_emu2_chat(instr: str, sup: list[dict], query: dict, dataset: str) -> str:
    """The ``'emu2-chat' in engine`` branch (same file), quoted::

        input_text = f"{task_instruction}\\n"
        ...        input_text += "[<IMG_PLH>]"
        input_text += f"[{n_shot_support[i]['question']}\\nAnswer: {format_answer(...)}]."
        ...        input_text += "[<IMG_PLH>]"
        input_text += f"[{query_text}\\nAnswer:"
        inputs = model.build_input_ids(text=[input_text], tokenizer=tokenizer, image=images)
    """
    input_text = f"{instr}\n"
    for s in sup:
        for _ in s["image"]:
            input_text += "[<IMG_PLH>]"
        input_text += f"[{s['question']}\nAnswer: {_format_answer(s['answer'], dataset)}]."
    for _ in _images(query["image"]):
        input_text += "[<IMG_PLH>]"
    return input_text + f"[{query['question']}\nAnswer:"


def ref_idefics(instr: str, sup: list[dict], query: dict, dataset: str) -> list[Any]:
    prompts: list[Any] = [f"You are a helpful assistant.\n{instr}\n"]
    for s in sup:
        for p in s["image"]:
            prompts.append(("IMG", p))
        prompts.append(f"\nUser: {s['question']}")
        prompts.append(f"\nAssistant: {_format_answer(s['answer'], dataset)}\n")
    for p in _images(query["image"]):
        prompts.append(("IMG", p))
    prompts.append(f"\nUser: {query['question']}")
    prompts.append("\nAssistant:")
    return prompts


def ref_gpt4v(instr: str, sup: list[dict], query: dict) -> list[dict]:
    content = [{"type": "text",
                "text": f"{instr}\nEnsure the generated answers only contain the answer to the question and no other information."}]
    for item in sup:
        for p in item["image"]:
            content.append({"type": "image_url", "image_url": {"url": p, "detail": "low"}})
        content.append({"type": "text", "text": item["question"]})
        content.append({"type": "text", "text": "The answer is " + str(item["answer"])})
    for p in _images(query["image"]):
        content.append({"type": "image_url", "image_url": {"url": p, "detail": "low"}})
    content.append({"type": "text", "text": query["question"] + " The answer is"})
    return [{"role": "user", "content": content}]


# -- the table -----------------------------------------------------------------------------------
def _cases(root: Path, family: str, description: str = "detailed", shots: tuple[int, ...] = (0, 1, 2, 4)):
    bench = VLICL({"data_root": str(root), "tasks": I2T_TASKS, "shots": shots, "seeds": (0, 1),
                   "prompt_style": "reference", "reference_family": family, "description": description})
    for item in bench.items():
        task = item.group["task"]
        ep = bench.episode(item)
        query = json.loads((root / task / "query.json").read_text())
        query = next(q for i, q in enumerate(query) if str(q.get("id", i)) == item.payload[3])
        sup = _reference_support(root, task, query, ep)
        # the image refs in prompt order: the support's, then the query's
        refs = [r for s in sup for r in s["image"]] + _images(query["image"])
        instr = TASKS[task].description(description)
        yield bench.request(item), task, instr, sup, query, refs


@pytest.mark.parametrize("family,conv", [("llava", "llava_v1"), ("llava-onevision", "qwen_1_5")])
@pytest.mark.parametrize("description", ["detailed", "concise", "none"])
def test_llava(release: Path, family: str, conv: str, description: str) -> None:
    n = 0
    for req, task, instr, sup, query, refs in _cases(release, family, description):
        assert len(req.messages) == 1 and req.max_new_tokens == 15 and req.min_new_tokens == 1
        assert render(req, lambda i, _: "<image>") == ref_llava(instr, sup, query, task, conv)
        n += 1
    assert n > 100


def test_qwen_vl(release: Path) -> None:
    data_path = str(release)
    for req, task, instr, sup, query, refs in _cases(release, "qwen-vl"):
        got = render(req, lambda i, _: os.path.join(data_path, refs[i]))
        assert got == ref_qwen_vl(instr, sup, query, task, data_path)


@pytest.mark.parametrize("family,ref", [("openflamingo", ref_flamingo), ("otter", ref_otter)])
def test_base_interleaved(release: Path, family: str, ref: Any) -> None:
    for req, task, instr, sup, query, refs in _cases(release, family):
        assert render(req, lambda i, _: "<image>") == ref(instr, sup, query, task)


@pytest.mark.parametrize("family,token,ref", [("internlm-x2", "<ImageHere>", ref_internlm_x2),
                                              ("emu2-chat", "[<IMG_PLH>]", ref_emu2_chat)])
def test_internlm_x2_and_emu2_chat(release: Path, family: str, token: str, ref: Any) -> None:
    """The two engines of ``ICL_I2T_inference`` that had no layout here (ref_internlm_x2 and
    ref_emu2_chat quote their branches): each image written as the engine's placeholder
    (InternLM-XComposer2 ``<ImageHere>``; Emu2 ``[<IMG_PLH>]``, "the image placeholder which will
    be replaced by image embeddings" in BAAI's Emu2 README) gives the reference's string."""
    n = 0
    for req, task, instr, sup, query, refs in _cases(release, family):
        assert len(req.messages) == 1 and req.max_new_tokens == 15 and req.min_new_tokens == 1
        assert render(req, lambda i, _: token) == ref(instr, sup, query, task)
        n += 1
    assert n > 100


def test_idefics(release: Path) -> None:
    for req, task, instr, sup, query, refs in _cases(release, "idefics"):
        expected: list[Any] = []
        for p in ref_idefics(instr, sup, query, task):  # the processor concatenates adjacent text
            if isinstance(p, str) and expected and isinstance(expected[-1], str):
                expected[-1] += p
            else:
                expected.append(p)
        images = iter(refs)
        got = [("IMG", next(images)) if isinstance(p, np.ndarray) else p for p in req.messages[0].content]
        assert got == expected


def test_gpt4v_message(release: Path) -> None:
    model = OpenAIChat(model="gpt-4-vision-preview", detail="low", send_seed=False)
    for req, task, instr, sup, query, refs in _cases(release, "gpt4v"):
        messages = model.payload(req)["messages"]
        images = iter(refs)
        for part in messages[0]["content"]:
            if part["type"] == "image_url":
                assert part["image_url"]["url"].startswith("data:image/png;base64,")
                part["image_url"]["url"] = next(images)
        assert messages == ref_gpt4v(instr, sup, query)


def test_reference_style_refuses_layouts_the_reference_lacks() -> None:
    with pytest.raises(ValueError, match="no text-only or chain-of-thought layout"):
        VLICL({"fast": True, "prompt_style": "reference", "variant": "text"})
    with pytest.raises(ValueError, match="no text-only or chain-of-thought layout"):
        VLICL({"fast": True, "prompt_style": "reference", "cot": True})


def test_keys_and_plots_of_other_settings(release: Path) -> None:
    chat = VLICL({"data_root": str(release), "tasks": ("clevr",), "shots": (1,), "seeds": (0,)})
    ref = VLICL({"data_root": str(release), "tasks": ("clevr",), "shots": (1,), "seeds": (0,),
                 "prompt_style": "reference"})
    rep = VLICL({"data_root": str(release), "tasks": ("clevr",), "shots": (1,), "seeds": (0,), "repeat": 2})
    k_chat, k_ref, k_rep = (next(iter(b.items())) for b in (chat, ref, rep))
    assert k_chat.key == "clevr/image/detailed/direct/seed0/shot1/c0"  # the historical key
    assert k_ref.key == "clevr/image/detailed/direct+reference:llava/seed0/shot1/c0"
    assert k_rep.key == "clevr/image/detailed/direct+x2/seed0/shot1/c0"
    # appendix B.4: one unique shot, shown twice
    ep = rep.episode(k_rep)
    assert len(ep.support) == 2 and ep.support[0] == ep.support[1]
