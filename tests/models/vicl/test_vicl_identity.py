"""The contents of the file a ``config=`` model argument names are part of the model's
identity (``icl.run.planning.models.make_model`` hashes ``weight_files()``): editing the file gives a
new model id, so no stored answer is reused for another architecture."""

import json

from _tiny import PAINTER, painter_checkpoint
from icl.run.planning.config import ModelSpec
from icl.run.planning.models import make_model


def test_config_file_contents_enter_the_model_id(tmp_path):
    ckpt = painter_checkpoint(tmp_path)
    cfg = tmp_path / "painter.json"
    cfg.write_text(json.dumps(PAINTER))
    spec = ModelSpec("painter", {"weights": str(ckpt), "config": str(cfg)})
    first = make_model(spec, "cpu")
    assert str(cfg) in first.identity["weights"]
    assert make_model(spec, "cpu").model_id == first.model_id
    cfg.write_text(json.dumps(dict(PAINTER, depth=6)))  # same path, same argument, other architecture
    assert make_model(spec, "cpu").model_id != first.model_id
