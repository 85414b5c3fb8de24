"""Task records (schema ``vif-task-1``, docs/vif.md) and the release loader: errors name the task
and the field; image paths stay inside the release folder; images go through the capped reader.

The official release (shim0114/VIF-Bench README.md: ``metadata.jsonl``, ``tasks/<id>/layout.json``,
``orientations.json``, ``arrows.json``) ships pre-rendered VI images; the stored repository has no
copy of those per-task JSON files, so our schema is our own (docs/vif.md says so) and these
fixtures are records of it, with real PNG files written by OpenCV."""

import json
import os

import cv2
import numpy as np
import pytest

from icl.benchmarks.vif.schema import TaskError, load_release, parse_task, read_image, record


def _rec(**over):
    rec = {"id": "t1", "references": [{"file": "refs/a.png", "role": "main", "type": "dog"},
                                      {"file": "refs/b.png", "role": "scene", "type": "background"}],
           "layout": [{"ref": 0, "box": [0.1, 0.2, 0.5, 0.9]}], "instruction": "A dog in a park.",
           "orientations": [{"ref": 0, "yaw": 30, "pitch": -10}],
           "arrows": [{"kind": "wind", "start": [0.0, 0.5], "end": [0.5, 0.5]}],
           "conflicts": {"wind": True}, "text_subset": True}
    rec.update(over)
    return rec


def test_valid_record_round_trips():
    t = parse_task(_rec())
    assert t.vi_types == ("layout", "orientation", "wind") and t.n_vis == 3 and t.conflict("wind")
    assert not t.conflict("orientation")
    assert parse_task(record(t)) == t


@pytest.mark.parametrize("over, where", [
    ({"references": []}, "field references: expected 1..7"),
    ({"references": [{"file": "a.png", "role": "hero", "type": "dog"}]}, "field references[0].role"),
    ({"references": [{"file": "/etc/passwd", "role": "main", "type": "dog"}]}, "field references[0].file"),
    ({"references": [{"file": "../x.png", "role": "main", "type": "dog"}]}, "field references[0].file"),
    ({"references": [{"file": "a\\..\\x.png", "role": "main", "type": "dog"}]}, "field references[0].file"),
    ({"layout": [{"ref": 0, "box": [0.5, 0.2, 0.4, 0.9]}]}, "field layout[0].box: needs x0 < x1"),
    ({"layout": [{"ref": 0, "box": [0.1, 0.2, 1.5, 0.9]}]}, "field layout[0].box[2]: 1.5 is outside"),
    ({"layout": [{"ref": 2, "box": [0.1, 0.2, 0.5, 0.9]}]}, "field layout[0].ref"),
    ({"layout": [{"ref": 1, "box": [0.1, 0.2, 0.5, 0.9]}]}, "field layout: box of reference 1, whose role is 'scene'"),
    ({"layout": []}, "field layout: every task"),
    ({"orientations": [{"ref": 0, "yaw": 200, "pitch": 0}]}, "field orientations[0].yaw"),
    ({"arrows": [{"kind": "rain", "start": [0, 0], "end": [1, 1]}]}, "field arrows[0].kind"),
    ({"arrows": [{"kind": "wind", "start": [0.2, 0.2], "end": [0.2, 0.2]}]}, "field arrows[0]: start and end"),
    ({"conflicts": {"light": True}}, "field conflicts.light: marked true but the task has no light"),
    ({"conflicts": {"layout": True}}, "field conflicts.layout: unknown field"),
    ({"poses": [{"ref": 0, "file": "p.png"}]}, "field poses[0].description: required on the text subset"),
    ({"colour": "red"}, "field record.colour: unknown field"),
    ({"text_subset": "yes"}, "field text_subset"),
])
def test_schema_errors_name_task_and_field(over, where):
    with pytest.raises(TaskError, match="^vif: task t1, " + where.replace("(", r"\(").replace("[", r"\[")):
        parse_task(_rec(**over))


def test_too_many_visual_instructions():
    rec = _rec(orientations=[{"ref": 0, "yaw": 0, "pitch": 0}] * 4,
               arrows=[{"kind": "wind", "start": [0, 0], "end": [1, 1]}, {"kind": "light", "start": [0, 0], "end": [1, 1]}],
               conflicts={})
    with pytest.raises(TaskError, match="task t1, field record: 7 visual instructions"):
        parse_task(rec)


def _release(root, records):
    (root / "refs").mkdir(parents=True, exist_ok=True)
    img = np.zeros((8, 8, 3), np.uint8)
    img[..., 2] = 255  # BGR red on disk
    cv2.imwrite(str(root / "refs" / "a.png"), img)
    cv2.imwrite(str(root / "refs" / "b.png"), img)
    (root / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_release_loads_and_reads_rgb(tmp_path):
    _release(tmp_path, [_rec(), _rec(id="t2", text_subset=False)])
    tasks = load_release(tmp_path)
    assert [t.id for t in tasks] == ["t1", "t2"]
    img = read_image(tmp_path, "refs/a.png", "t1", "references[0].file")
    assert img.shape == (8, 8, 3) and img[0, 0].tolist() == [255, 0, 0]  # RGB


def test_release_errors(tmp_path):
    _release(tmp_path, [_rec(), _rec()])
    with pytest.raises(TaskError, match="task t1, field id: repeated at line 2"):
        load_release(tmp_path)
    _release(tmp_path, [_rec(references=[{"file": "refs/none.png", "role": "main", "type": "dog"}])])
    with pytest.raises(TaskError, match="field references\\[0\\].file: 'refs/none.png': no such file"):
        load_release(tmp_path)
    (tmp_path / "tasks.jsonl").write_text("{not json\n")
    with pytest.raises(TaskError, match="task at line 1, field record: not JSON"):
        load_release(tmp_path)


def test_symlink_out_of_the_release_is_refused(tmp_path):
    outside = tmp_path / "outside.png"
    cv2.imwrite(str(outside), np.zeros((4, 4, 3), np.uint8))
    root = tmp_path / "release"
    _release(root, [_rec(references=[{"file": "refs/link.png", "role": "main", "type": "dog"}])])
    os.symlink(outside, root / "refs" / "link.png")
    with pytest.raises(TaskError, match="field references\\[0\\].file: 'refs/link.png' resolves outside"):
        load_release(root)


def test_corrupt_image_is_an_error_naming_the_task(tmp_path):
    _release(tmp_path, [_rec()])
    data = (tmp_path / "refs" / "a.png").read_bytes()
    (tmp_path / "refs" / "a.png").write_bytes(data[: len(data) // 2])
    with pytest.raises(TaskError, match="task t1, field references\\[0\\].file"):
        read_image(tmp_path, "refs/a.png", "t1", "references[0].file")


def test_lone_surrogate_names_line_and_field(tmp_path):
    """``"\\ud800"`` is legal JSON but no Unicode: the record's line, the file and the field."""
    _release(tmp_path, [_rec(), _rec(id="t2", references=[{"file": "refs/a.png", "role": "main", "type": "d\ud800g"}])])
    assert "\\ud800" in (tmp_path / "tasks.jsonl").read_text()
    with pytest.raises(TaskError, match=r"task at line 2 of .*tasks.jsonl, field references\[0\].type: not valid "
                                        r"Unicode: a lone surrogate U\+D800 at character 1"):
        load_release(tmp_path)
