"""``clip-judge`` on tiny CLIP and SigLIP folders (tiny_t2i.build_clip / build_siglip, built with
``CLIPModel`` / ``SiglipModel`` and their processors), loaded through ``AutoModel`` /
``AutoProcessor``. The reference is each model's own ``forward``: ``logits_per_image`` is
``exp(logit_scale) * cosine`` for CLIP and ``exp(logit_scale) * cosine + logit_bias`` for SigLIP
(transformers models/clip/modeling_clip.py, models/siglip/modeling_siglip.py), so the nearest
label must be its argmax and the scores must match it to float32 rounding (1e-5)."""

import numpy as np
import pytest
import torch
from tiny_t2i import build_clip, build_siglip

from icl.benchmarks.vlicl.tasks import JUDGE_PROMPT, JUDGE_PROMPT_OPEN_MI
from icl.models import get_model
from icl.models.requests import ChatRequest
from icl.models.t2i.clip_judge import PRESENCE_PROMPT, CLIPJudge, choice_request, presence_request
from icl.models.t2i.common import RequestRefused

LABELS = ["red star", "blue circle", "green square", "two stars"]


@pytest.fixture(scope="module", params=["clip", "siglip"])
def judge(request, tmp_path_factory):
    build = {"clip": build_clip, "siglip": build_siglip}[request.param]
    model = get_model("clip-judge", weights=str(build(tmp_path_factory.mktemp(request.param) / "m")))
    model.load("cpu")
    return model


def images(n: int = 4) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [rng.integers(0, 256, (20 + 3 * i, 30 - 2 * i, 3), dtype=np.uint8) for i in range(n)]


def reference_logits(judge: CLIPJudge, image: np.ndarray, labels: list[str]) -> torch.Tensor:
    texts = [judge.label_template.format(x) for x in labels]
    padding = "max_length" if judge.kind == "siglip" else True
    enc = judge.processor(text=texts, images=[image], padding=padding, truncation=True, return_tensors="pt")
    with torch.no_grad():
        return judge.model(**enc).logits_per_image[0]


def test_the_presence_question_is_vlicl_s(judge):
    assert PRESENCE_PROMPT == JUDGE_PROMPT


def test_nearest_label_and_scores_match_the_model_s_forward(judge):
    imgs = images()
    picks = judge.nearest(imgs, [LABELS] * len(imgs))
    for img, k in zip(imgs, picks):
        logits = reference_logits(judge, img, LABELS)
        assert k == int(logits.argmax())
        scores = judge.presence([img] * len(LABELS), LABELS)
        scale = judge.model.logit_scale.exp().item()
        if judge.kind == "clip":
            expected = logits / scale
        else:
            expected = torch.sigmoid(logits)
        np.testing.assert_allclose(scores, expected.double().numpy(), atol=1e-5, rtol=0)


def test_chat_interface_answers_both_questions_and_refuses_others(judge):
    imgs = images(2)
    scores = judge.presence(imgs, ["red star", "blue circle"])
    reqs = [presence_request("p0", imgs[0], "red star"), presence_request("p1", imgs[1], "blue circle"),
            choice_request("c0", imgs[0], LABELS), ChatRequest.user("odd", imgs[0], "Describe the image."),
            ChatRequest.user("two", imgs[0], imgs[1], PRESENCE_PROMPT.format(concept="red star"))]
    out = judge.predict(reqs)
    assert out[:2] == ["yes" if s >= judge.cut else "no" for s in scores]
    # VL-ICL's open_t2i_mi question (the reference code's wording, without "the following concept:")
    mi = ChatRequest.user("mi", imgs[0], JUDGE_PROMPT_OPEN_MI.format(concept="red star"), max_new_tokens=5)
    assert judge.predict([mi]) == out[:1]
    assert out[2] == LABELS[judge.nearest([imgs[0]], [LABELS])[0]]
    assert isinstance(out[3], RequestRefused) and "'odd'" in str(out[3])
    assert isinstance(out[4], RequestRefused) and "2 images" in str(out[4])
    # the threshold is stated, and moving it moves the verdict
    judge.cut, before = float(scores[0]) + 1e-6, judge.cut
    try:
        assert judge.predict(reqs[:1]) == ["no"]
    finally:
        judge.cut = before


def test_defaults_and_arguments(tmp_path):
    assert CLIPJudge().threshold is None
    with pytest.raises(ValueError, match="label_template"):
        CLIPJudge(label_template="a photo")
    with pytest.raises(ValueError, match="labels"):
        choice_request("c", images(1)[0], ["only one"])
