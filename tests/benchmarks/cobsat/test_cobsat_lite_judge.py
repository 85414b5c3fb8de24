"""CoBSAT-lite drawings and ``cobsat-judge``: every (attribute, object) of every drawable theme
reads back through the benchmark's own questions; unreadable images parse as -1; requests not
marked as lite data are refused. Questions follow ``evaluation_icl.py`` (UW-Madison-Lee-Lab/CoBSAT)."""

import numpy as np
import pytest

from icl.benchmarks.cobsat import lite
from icl.benchmarks.cobsat.judge import LITE_PREFIX, CoBSATJudge
from icl.benchmarks.cobsat.questions import chosen_option, question, true_option
from icl.benchmarks.cobsat.vocab import THEMES, VOCAB
from icl.models import get_model
from icl.models.requests import ChatRequest


def _ask(judge, image, theme, aspect, desc=None, rid=LITE_PREFIX + "x"):
    parts = ([] if image is None else [image]) + [question(theme, aspect, desc)]
    return judge.predict([ChatRequest.user(rid, *parts)])[0]


def test_every_lite_image_reads_back():
    judge = get_model("cobsat-judge")
    assert isinstance(judge, CoBSATJudge)
    for theme in THEMES.values():
        if not theme.drawable:
            with pytest.raises(ValueError, match="cannot draw"):
                lite.draw(theme, VOCAB[theme.attribute][0], VOCAB[theme.object][0])
            continue
        for a in VOCAB[theme.attribute]:
            reqs, want = [], []
            for o in VOCAB[theme.object]:
                img = lite.draw(theme, a, o)
                assert img.shape == (lite.SIZE, lite.SIZE, 3) and img.dtype == np.uint8
                for aspect, space, value in (("object", theme.object, o), ("attribute", theme.attribute, a)):
                    reqs.append(ChatRequest.user(f"{LITE_PREFIX}{theme.name}/{a}/{o}/{aspect}", img,
                                                 question(theme, aspect)))
                    want.append(true_option(space, value))
            assert [chosen_option(x) for x in judge.predict(reqs)] == want


def test_unreadable_images_and_descriptions():
    judge = CoBSATJudge()
    theme = THEMES["texture_object"]
    grey = np.full((lite.SIZE, lite.SIZE, 3), 128, np.uint8)
    assert chosen_option(_ask(judge, grey, theme, "object")) == -1
    noisy = lite.draw(theme, "lace", "cup").copy()
    noisy[lite.ORIGIN:lite.ORIGIN + 12, lite.ORIGIN:lite.ORIGIN + 12] = 250  # paint out part of the glyph
    assert chosen_option(_ask(judge, noisy, theme, "object")) == -1
    wrong_size = np.zeros((64, 64, 3), np.uint8)
    assert chosen_option(_ask(judge, wrong_size, theme, "attribute")) == -1
    # a description: the option named first, whole words only
    desc = "A lace cup next to a wooden hat"
    assert _ask(judge, None, theme, "object", desc) == str(true_option("object", "cup"))
    assert _ask(judge, None, theme, "attribute", desc) == str(true_option("texture", "lace"))
    assert _ask(judge, None, THEMES["style_object"], "attribute", "a car in wireframe style") == "9"
    assert chosen_option(_ask(judge, None, theme, "object", "nothing at all")) == -1


def test_release_requests_are_refused():
    judge = CoBSATJudge()
    img = lite.draw("color_object", "red", "cup")
    with pytest.raises(ValueError, match="only CoBSAT-lite"):
        judge.predict([ChatRequest.user("cobsat/release/image/x/object", img, question(THEMES["color_object"],
                                                                                        "object"))])
