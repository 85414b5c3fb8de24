"""hf-vlm end to end on tiny random LLaVA and Idefics3 checkpoints loaded through the real
``from_pretrained`` path: batching, left padding, interleaving, token limits, seeded sampling,
the context guard, precisions, and bad input."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from icl.models import ChatRequest, ContextOverflowError, Message, get_model
from icl.models.vlm.hf import HFVisionLanguage, _PerRowControl
from icl.models.vlm.prompt import RequestError
from icl.models.weights import WeightsError, tree_digest


def images(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (int(rng.integers(9, 30)), int(rng.integers(9, 30)), 3), dtype=np.uint8)
            for _ in range(n)]


def mixed_requests() -> list[ChatRequest]:
    """Different lengths, 0-3 images, system turns, multi-turn, per-request token limits."""
    a, b, c, d = images(4)
    return [
        ChatRequest.user("one-image", a, "what is the image ?", max_new_tokens=6),
        ChatRequest.user("text-only", "how many cat", system="you helpful", max_new_tokens=4),
        ChatRequest.user("three", b, "red", c, "blue", d, "count", max_new_tokens=9, min_new_tokens=3),
        ChatRequest("turns", (Message("user", (a, "dax ?")), Message("assistant", ("blicket",)),
                              Message("user", (b, "and this ?"))), max_new_tokens=5),
        ChatRequest.user("short", "dog", max_new_tokens=1),
    ]


def test_batched_equals_batch1_loop(vlm):
    requests = mixed_requests()
    batched = vlm.token_answers(requests)
    single = [vlm.token_answers([r])[0] for r in requests]
    assert batched == single
    assert all(isinstance(t, list) and len(t) <= r.max_new_tokens for t, r in zip(batched, requests))
    assert vlm.predict(requests) == [vlm.tokenizer.decode(t, skip_special_tokens=True).strip() for t in batched]


def test_batches_are_left_padded(vlm):
    requests = mixed_requests()
    enc = vlm.encode(requests)
    mask = enc["attention_mask"]
    assert (mask[:, -1] == 1).all(), "every prompt must end at the last position"
    lengths = mask.sum(1)
    assert len(set(lengths.tolist())) > 1
    for row, n in zip(range(len(requests)), lengths.tolist()):
        pad = mask.shape[1] - n
        assert mask[row, :pad].sum() == 0 and (enc["input_ids"][row, :pad] == vlm.tokenizer.pad_token_id).all()


def test_interleaved_images_keep_their_places(vlm):
    a, b = images(2, seed=3)
    text, _ = vlm.render(ChatRequest.user("x", a, "red", b, "blue"))
    token = vlm.image_token
    first, second = text.index(token), text.index(token, text.index(token) + 1)
    assert first < text.index("red") < second < text.index("blue")
    # The images reach the model in request order, and the order changes what it computes.
    ab, ba = (vlm.encode([ChatRequest.user("x", *parts)]) for parts in ((a, "red", b, "blue"), (b, "red", a, "blue")))
    pa, pb = ab["pixel_values"].flatten(0, -4), ba["pixel_values"].flatten(0, -4)
    assert torch.equal(pa[0], pb[1]) and torch.equal(pa[1], pb[0]) and not torch.equal(pa[0], pa[1])
    with torch.inference_mode():
        la, lb = (vlm.model(**enc).logits[0, -1] for enc in (ab, ba))
    assert (la - lb).abs().max() > 1e-4


def test_llava_family_folds_system_text_into_the_first_user_turn(llava):
    text, _ = llava.render(ChatRequest.user("s", "dog", system="you helpful"))
    assert text.index("user") < text.index("you helpful") < text.index("dog")


def test_max_new_tokens_cuts_each_row(llava):
    req = mixed_requests()[2]
    long = llava.token_answers([req])[0]
    cut = [ChatRequest(req.id, req.messages, max_new_tokens=n, min_new_tokens=0) for n in (1, 2, 4)]
    assert [len(t) for t in llava.token_answers(cut)] == [min(n, len(long)) for n in (1, 2, 4)]
    assert llava.token_answers(cut)[2] == long[:4]


def test_min_new_tokens_masks_end_of_sequence(tiny_folders):
    model = HFVisionLanguage(weights=str(tiny_folders["llava"]))
    model.load("cpu")
    probe = ChatRequest.user("p", "how many cat ?", max_new_tokens=1, min_new_tokens=1)
    first = model.token_answers([probe])[0][0]
    head = model.model.get_output_embeddings().weight
    with torch.no_grad():  # make end-of-sequence the greedy first token of this prompt
        head[model.eos_ids[0]] = 10 * head[first]
    settings = [(0, 5), (1, 5), (3, 3), (4, 6)]
    answers = model.token_answers([ChatRequest(f"m{lo}", probe.messages, max_new_tokens=hi, min_new_tokens=lo)
                                   for lo, hi in settings])
    assert answers[0] == []
    assert [len(a) >= lo for a, (lo, _) in zip(answers, settings)] == [True] * 4
    assert len(answers[2]) == 3 and 4 <= len(answers[3]) <= 6


def test_sampling_is_seeded_per_request_and_batch_free(llava):
    a, = images(1, seed=5)
    greedy = ChatRequest.user("g", a, "what is", max_new_tokens=6)
    samples = [ChatRequest.user(f"s{s}", a, "what is", max_new_tokens=6, do_sample=True, temperature=3.0, seed=s)
               for s in range(4)]
    batch = llava.token_answers([greedy] + samples)
    assert batch == [llava.token_answers([r])[0] for r in [greedy] + samples]
    assert batch[0] == llava.token_answers([greedy])[0]
    assert len({tuple(t) for t in batch[1:]}) >= 3  # near-uniform at temperature 3


def test_gumbel_control_samples_the_softmax():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, 0.5]])
    gen = torch.Generator().manual_seed(11)
    control = _PerRowControl(prompt_len=1, min_new=[0], eos_ids=[3], sampling=[(gen, 0.5)])
    ids = torch.zeros(1, 2, dtype=torch.long)
    draws = [int(control(ids, logits.clone()).argmax()) for _ in range(6000)]
    freq = np.bincount(draws, minlength=5) / len(draws)
    expected = torch.softmax(logits[0] / 0.5, 0).numpy()
    np.testing.assert_allclose(freq, expected, atol=0.02)
    masked = _PerRowControl(prompt_len=2, min_new=[1], eos_ids=[0], sampling=[None])(ids, logits.clone())
    assert masked[0, 0] == -float("inf") and int(masked.argmax()) == 1


def test_context_guard_fails_only_the_overflowing_request(tiny_folders):
    model = HFVisionLanguage(weights=str(tiny_folders["llava"]), max_context=48)
    model.load("cpu")
    ok = ChatRequest.user("fits", images(1)[0], "what is", max_new_tokens=4)
    big = ChatRequest.user("too-long", *images(3), "what is", max_new_tokens=4)
    answers = model.predict([ok, big, ok])
    assert isinstance(answers[1], ContextOverflowError) and "too-long" in str(answers[1])
    assert answers[0] == answers[2] == model.predict([ok])[0]
    assert isinstance(model.predict([big])[0], ContextOverflowError)


def test_context_length_comes_from_the_configuration(tmp_path):
    from icl.models.vlm.tiny import build_llava

    model = HFVisionLanguage(weights=str(build_llava(tmp_path / "short", max_positions=40)))
    model.load("cpu")
    assert model.context == 40
    answers = model.predict([ChatRequest.user("a", "dog", max_new_tokens=3),
                             ChatRequest.user("b", *images(3), "dog", max_new_tokens=3)])
    assert isinstance(answers[0], str) and isinstance(answers[1], ContextOverflowError)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_half_precisions_on_cpu(tiny_folders, precision):
    model = get_model("hf-vlm", weights=str(tiny_folders["idefics3"]), precision=precision)
    model.load("cpu")
    assert model.model.dtype == {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    answers = model.predict(mixed_requests()[:3])
    assert all(isinstance(a, str) for a in answers)


def test_registry_identity_and_weights(tiny_folders, tmp_path, monkeypatch):
    model = get_model("hf-vlm", weights=str(tiny_folders["llava"]))
    assert isinstance(model, HFVisionLanguage)
    assert list(model.weight_files()) == [tiny_folders["llava"]]
    assert len(tree_digest(model.weight_files()[0])) == 64
    monkeypatch.delenv("ICL_WEIGHTS_DIR", raising=False)
    with pytest.raises(WeightsError, match="config.json"):
        HFVisionLanguage().weight_files()
    copy = shutil.copytree(tiny_folders["llava"], tmp_path / "no-template")
    for f in copy.glob("*"):
        if "chat_template" in f.name:
            f.unlink()
    with pytest.raises(WeightsError, match="no chat template"):
        HFVisionLanguage(weights=str(copy)).load("cpu")
    with pytest.raises(ValueError, match="precision"):
        HFVisionLanguage(precision="fp8")


def test_bad_requests_are_named(llava):
    with pytest.raises(RequestError, match="serves ChatRequest"):
        llava.predict(["not a request"])
    bad = ChatRequest.user("grey", "look", np.zeros((4, 4), np.uint8))
    with pytest.raises(RequestError, match=r"'grey' messages\[0\]\.content\[1\].*uint8 \[H, W, 3\]"):
        llava.predict([bad])
    with pytest.raises(RequestError, match="min_new_tokens"):
        llava.predict([ChatRequest.user("mm", "dog", max_new_tokens=2, min_new_tokens=3)])


def test_device_map_and_eager_attention_answer_alike(tiny_folders, llava):
    model = HFVisionLanguage(weights=str(tiny_folders["llava"]), device_map="cpu", attn_implementation="eager")
    model.load("cpu")
    assert model.model.config._attn_implementation == "eager"
    requests = mixed_requests()
    assert model.token_answers(requests) == llava.token_answers(requests)


def test_a_template_that_drops_images_is_reported(tiny_folders, tmp_path, caplog):
    copy = shutil.copytree(tiny_folders["idefics3"], tmp_path / "text-only-template")
    (copy / "chat_template.jinja").write_text(
        "{% for m in messages %}{{ m['role'] }} :{% for p in m['content'] if p['type'] == 'text' %} {{ p['text'] }}"
        "{% endfor %}<end_of_utterance>\n{% endfor %}Assistant :")
    model = HFVisionLanguage(weights=str(copy))
    with caplog.at_level("WARNING", logger="icl.models.vlm"):
        model.load("cpu")
    assert "does not mark an image" in caplog.text
    with pytest.raises(ValueError, match=r"refused requests \['pic'\]"):
        model.predict([ChatRequest.user("pic", images(1)[0], "what is")])
    assert isinstance(model.predict([ChatRequest.user("txt", "what is")])[0], str)


def test_raw_mode_renders_the_reference_prompt_and_answers(tiny_folders, llava):
    """``chat_template=raw`` (base interleaved checkpoints, ``--prompt-style reference``): the
    text as given, the processor's image token where each image is, no template around it; a
    checkpoint without any chat template is served."""
    copy = shutil.copytree(tiny_folders["llava"], tiny_folders.root / "llava-base")
    for f in copy.glob("*"):
        if "chat_template" in f.name:
            f.unlink()
    model = HFVisionLanguage(weights=str(copy), chat_template="raw")
    model.load("cpu")
    a, b = images(2)
    req = ChatRequest.user("ref", "USER: do\n", a, "\nq\nAnswer: 1\n", b, "\nq\nAnswer:")
    text, imgs = model.render(req)
    assert text == "USER: do\n<image>\nq\nAnswer: 1\n<image>\nq\nAnswer:" and len(imgs) == 2
    assert all(isinstance(x, str) for x in model.predict([req, ChatRequest.user("t", "plain")]))


def test_chat_template_file_name_and_system(tiny_folders, tmp_path):
    from icl.run.planning.config import ModelSpec
    from icl.run.planning.models import make_model

    template = tmp_path / "plain.jinja"
    template.write_text("{% for m in messages %}[{{ m['role'] }}]{% for p in m['content'] %}"
                        "{% if p['type'] == 'image' %}<image>{% else %}{{ p['text'] }}{% endif %}{% endfor %}"
                        "{% endfor %}[assistant]")
    model = HFVisionLanguage(weights=str(tiny_folders["llava"]), chat_template=str(template), system="Be brief.")
    model.load("cpu")
    text, _ = model.render(ChatRequest.user("x", images(1)[0], "what", system="ignored"))
    assert text == "[user]Be brief.\n\n<image>\nwhat[assistant]"  # LLaVA folds the system text into the user turn
    # the file's contents are part of the identity: editing it gives another model id
    spec = ModelSpec("hf-vlm", {"weights": str(tiny_folders["llava"]), "chat_template": str(template)})
    before = make_model(spec, "cpu").model_id
    template.write_text(template.read_text() + " ")
    assert make_model(spec, "cpu").model_id != before
    with pytest.raises(WeightsError, match="no chat template named 'tool_use'"):
        HFVisionLanguage(weights=str(tiny_folders["llava"]), chat_template="tool_use").load("cpu")
    with pytest.raises(WeightsError, match="is not a file"):
        HFVisionLanguage(weights=str(tiny_folders["llava"]), chat_template=str(tmp_path / "gone.jinja")).weight_files()


def test_checkpoint_code_is_never_run(tiny_folders, tmp_path):
    """Issue 28: a checkpoint whose config names its own code (``auto_map``) loads the built-in
    class without asking (``trust_remote_code=False``) and without importing that code."""
    import json

    copy = shutil.copytree(tiny_folders["llava"], tmp_path / "auto-map")
    marker = tmp_path / "ran.txt"
    (copy / "modeling_evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    cfg = json.loads((copy / "config.json").read_text())
    cfg["auto_map"] = {"AutoModelForImageTextToText": "modeling_evil.Evil", "AutoConfig": "modeling_evil.EvilConfig"}
    (copy / "config.json").write_text(json.dumps(cfg))
    model = HFVisionLanguage(weights=str(copy))
    model.load("cpu")
    assert not marker.exists() and isinstance(model.predict([ChatRequest.user("t", "dog")])[0], str)
