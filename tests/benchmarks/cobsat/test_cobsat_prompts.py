"""Vocabularies and prompt lists against the reference, UW-Madison-Lee-Lab/CoBSAT:

- ``configs.py``: ``item_dict`` (Table 5 vocabularies in the reference's order), ``item2word``
  (``3d`` -> ``wireframe``, ``park`` -> ``amusement park``), ``task_dataframe`` (task ids, x/theta
  spaces);
- ``load_datasets/gen_prompts.py``: ``random.seed(123)``, then 1,000 rounds of ``shuffle(x_list)``,
  ``shuffle(theta_list)`` on ``list(range(10))``, each copied;
- ``load_datasets/prompts_list_default.json``: the published list; the rows below are copied by
  hand from it (the file is not vendored);
- ``load_dataset.py`` ``load_inputs``: prompt i at N shots uses ``x_list[0..N]`` (query last) and
  ``theta = theta_list[theta_idxs[N + 1]]``.
"""

import csv
import io

import pytest

from icl.benchmarks.cobsat.prompts import (PROMPTS, legacy_lists, legacy_prompt, paired_prompt, prompt,
                                           prompts_csv)
from icl.benchmarks.cobsat.vocab import TASKS, VOCAB, WORD_MAP, display, get_task, image_relpath, undisplay

# copied by hand from load_datasets/prompts_list_default.json (index: x_list, theta_list)
PUBLISHED_ROWS = {
    0: ([8, 7, 5, 9, 2, 3, 6, 1, 4, 0], [7, 6, 3, 4, 1, 0, 2, 5, 9, 8]),
    1: ([7, 4, 3, 6, 2, 1, 0, 8, 5, 9], [3, 4, 8, 1, 9, 2, 7, 6, 5, 0]),
    2: ([1, 4, 9, 5, 3, 7, 6, 2, 8, 0], [7, 4, 8, 6, 9, 0, 3, 2, 5, 1]),
    3: ([5, 9, 0, 2, 4, 1, 3, 7, 6, 8], [3, 1, 4, 2, 7, 6, 9, 5, 0, 8]),
    500: ([3, 6, 5, 2, 8, 4, 9, 7, 1, 0], [2, 6, 7, 0, 5, 8, 3, 1, 4, 9]),
    998: ([5, 9, 6, 2, 1, 7, 4, 3, 8, 0], [3, 8, 1, 6, 0, 9, 7, 4, 5, 2]),
    999: ([2, 0, 5, 7, 6, 9, 3, 8, 4, 1], [1, 6, 7, 3, 2, 9, 8, 4, 0, 5]),
}


def test_vocabularies_are_the_references_in_its_order():
    assert VOCAB["color"] == ("yellow", "white", "red", "purple", "pink", "orange", "green", "brown", "blue",
                              "black")
    assert VOCAB["object"] == ("leaf", "hat", "cup", "chair", "car", "box", "book", "ball", "bag", "apple")
    assert VOCAB["animal"] == ("zebra", "tiger", "sheep", "pig", "monkey", "lion", "dog", "cow", "cat", "bird")
    assert VOCAB["style"] == ("watercolor", "sketch", "pixel", "origami", "lego", "icon", "graffiti", "futuristic",
                              "3d", "old")
    assert VOCAB["action"] == ("swim", "sleep", "sing", "run", "read", "fly", "eat", "drink", "cry", "angry")
    assert VOCAB["background"] == ("beach", "desert", "glacier", "volcano", "park", "gym", "waterfall", "space",
                                   "cave", "seafloor")
    assert VOCAB["texture"] == ("wood", "wicker", "sequined", "plastic", "paper", "metal", "leather", "lace",
                                "denim", "ceramic")
    assert dict(WORD_MAP) == {"3d": "wireframe", "park": "amusement park"}
    assert get_task("color_I") is TASKS["Color-I"] and get_task("background_II") is TASKS["Background-II"]
    with pytest.raises(ValueError, match="unknown task"):
        get_task("colour_I")
    assert display("3d") == "wireframe" and undisplay("amusement park") == "park" and display("red") == "red"
    # task_dataframe: id, name, task type, x space, theta space
    want = [(1, "Color-I", "color_object", "color", "object"), (2, "Color-II", "color_object", "object", "color"),
            (3, "Background-I", "background_animal", "background", "animal"),
            (4, "Background-II", "background_animal", "animal", "background"),
            (5, "Style-I", "style_object", "style", "object"), (6, "Style-II", "style_object", "object", "style"),
            (7, "Action-I", "action_animal", "action", "animal"), (8, "Action-II", "action_animal", "animal", "action"),
            (9, "Texture-I", "texture_object", "texture", "object"),
            (10, "Texture-II", "texture_object", "object", "texture")]
    assert [(t.number, t.name, t.theme.name, t.text_space, t.latent_space) for t in TASKS.values()] == want
    # helper.py find_image: datasets/{detail space}_{obj}/{detail}_{obj}.jpg with raw values
    assert image_relpath("style_object", "3d", "car") == "datasets/style_car/3d_car.jpg"
    assert image_relpath("background_animal", "park", "dog") == "datasets/background_dog/park_dog.jpg"


def test_legacy_rule_gives_the_published_rows():
    lists = legacy_lists()
    assert len(lists) == PROMPTS
    for i, (x, theta) in PUBLISHED_ROWS.items():
        assert lists[i] == (tuple(x), tuple(theta)), i


@pytest.mark.parametrize("task", list(TASKS))
def test_legacy_prompts_follow_load_inputs_for_every_shot_and_index(task):
    t = TASKS[task]
    for shots in (0, 2, 4, 6, 8):
        for i in range(PROMPTS):
            x, theta = legacy_lists()[i]
            p = legacy_prompt(task, shots, i)
            assert p.text == x[:shots + 1] and p.latent == theta[shots + 1]
            assert p.text_values == tuple(t.text_values[k] for k in x[:shots + 1])
            assert p.latent_value == t.latent_values[theta[shots + 1]]


def test_legacy_prompt_by_hand():
    # prompt 0, Style-I, 2 shots: x_list[0..2] = 8, 7, 5 -> 3d (wireframe), futuristic, icon;
    # theta_list[3] = 4 -> car
    p = legacy_prompt("Style-I", 2, 0)
    assert p.text_values == ("3d", "futuristic", "icon") and p.latent_value == "car"
    # the latent value changes with N in the legacy list: theta_list[1] = 6 -> book at 0 shots
    assert legacy_prompt("Style-I", 0, 0).latent_value == "book"
    with pytest.raises(ValueError, match="1000 prompts"):
        legacy_prompt("Style-I", 2, 1000)


def test_paired_prompts_keep_the_latent_across_shots():
    for task in TASKS:
        for i in range(50):
            ps = [paired_prompt(task, n, i) for n in (0, 2, 4, 6, 8)]
            assert len({p.latent for p in ps}) == 1
            full = ps[-1].text
            assert len(set(full)) == 9  # distinct text values
            for p in ps:
                assert p.text == full[:p.shots + 1]  # the same order, cut
                assert len(p.misleading) == p.shots + 1 and p.latent not in p.misleading
    # latents are spread (not a constant), and the global seed changes the lists
    assert len({paired_prompt("Color-I", 2, i).latent for i in range(100)}) == 10
    assert [paired_prompt("Color-I", 2, i, seed=1) for i in range(5)] != [paired_prompt("Color-I", 2, i) for i in range(5)]
    with pytest.raises(ValueError, match="shots"):
        paired_prompt("Color-I", 9, 0)
    with pytest.raises(ValueError, match="unknown task"):
        prompt("Colour-I", 2, 0)


def test_prompts_csv_columns_word_map_and_bytes():
    ps = [legacy_prompt("Style-I", 2, 0), legacy_prompt("Background-II", 4, 1)]
    text = prompts_csv(ps, legacy=True)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0])[:5] == ["task", "shots", "index", "text_values", "latent"]
    assert rows[0] == {"task": "Style-I", "shots": "2", "index": "0", "text_values": "wireframe|futuristic|icon",
                       "latent": "car", "prompts": "legacy"}
    # Background-II prompt 1 at 4 shots: x_list[0..4] = 7, 4, 3, 6, 2 -> animals; theta_list[5] = 2 -> glacier
    assert rows[1]["text_values"] == "cow|monkey|pig|dog|sheep" and rows[1]["latent"] == "glacier"
    assert prompts_csv(ps, legacy=True) == text
