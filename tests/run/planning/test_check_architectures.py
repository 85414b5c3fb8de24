"""``--check``'s meta-device comparison for every family that builds a transformers or diffusers
network from a folder (``Adapter.architectures``): the tiny checkpoints of each family, saved
with the official classes (tests/models/t2i/tiny_t2i.py, tests/models/vicl/_official.py,
icl/models/vlm/tiny.py), pass; the same folder with one network's weights replaced by those of
the same class at other widths (another architecture: the shapes differ) fails, naming that
network's folder, and nothing is read into memory (the networks are built on ``meta``)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from icl.models import get_model
from icl.run.planning.check import inspect_weights
from icl.run.planning.check_parts import CHECKPOINT_DAMAGED, CHECKPOINT_REFUSED

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "models" / "vicl"))


def _sd(path: Path) -> Path:
    from tests.models.t2i.tiny_t2i import build_sd

    return build_sd(path)


def _seggpt(path: Path, hidden: int = 32) -> Path:
    from transformers import SegGptConfig, SegGptForImageSegmentation

    from test_vicl_seggpt import TINY

    SegGptForImageSegmentation(SegGptConfig(**{**TINY, "hidden_size": hidden})).save_pretrained(str(path))
    return path


def _visualcloze(path: Path) -> Path:
    from _official import visualcloze_folder

    return visualcloze_folder(path)


def _flux_kontext(path: Path) -> Path:
    from tests.models.t2i.tiny_t2i import build_flux_kontext

    return build_flux_kontext(path)


def _clip(path: Path) -> Path:
    from tests.models.t2i.tiny_t2i import build_clip

    return build_clip(path)


def _lvm(path: Path) -> Path:
    from _tiny import lvm_folders

    return lvm_folders(path)[0].parent


def _qwen_image_edit(path: Path) -> Path:
    from tests.models.t2i.tiny_t2i import build_qwen_image_edit

    return build_qwen_image_edit(path)


def _llava(path: Path) -> Path:
    from icl.models.vlm.tiny import build_llava

    return build_llava(path)


# family, folder builder, the model arguments naming the folder, the network whose weights are swapped
FAMILIES = [
    ("diffusers-t2i", _sd, lambda f: dict(weights=str(f)), "unet"),
    ("sd-vicl", _sd, lambda f: dict(weights=str(f)), "vae"),
    ("flux-kontext", _flux_kontext, lambda f: dict(weights=str(f)), "transformer"),
    ("visualcloze", _visualcloze, lambda f: dict(weights=str(f)), "transformer"),
    ("qwen-image-edit", _qwen_image_edit, lambda f: dict(weights=str(f)), "transformer"),
    ("lvm", _lvm, lambda f: dict(weights=str(f / "llm"), vqgan_weights=str(f / "vqgan")), "llm"),
    ("seggpt", _seggpt, lambda f: dict(weights=str(f)), ""),
    ("clip-judge", _clip, lambda f: dict(weights=str(f)), ""),
    ("hf-vlm", _llava, lambda f: dict(weights=str(f)), ""),
]


def _narrower(family: str, folder: Path, part: str, scratch: Path) -> None:
    """Replace ``folder/part``'s weights with those of another architecture: SegGPT saved at half
    the hidden size; for the others every matrix halved in its first dimension, under the
    checkpoint's own key names."""
    target = folder / part if part else folder
    if family == "seggpt":
        other = _seggpt(scratch / "other", hidden=16)
        for f in target.glob("*.safetensors"):
            f.unlink()
        for f in other.glob("*.safetensors"):
            shutil.copy(f, target / f.name)
        return
    from safetensors.torch import load_file, save_file

    for f in sorted(target.glob("*.safetensors")):
        tensors = load_file(str(f))
        changed = {k: (v[: max(1, v.shape[0] // 2)].contiguous() if v.ndim >= 2 else v) for k, v in tensors.items()}
        save_file(changed, str(f), metadata={"format": "pt"})


@pytest.mark.parametrize("family,build,args,part", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_a_family_checkpoint_passes_and_another_architecture_fails(family, build, args, part, tmp_path):
    folder = build(tmp_path / family)
    adapter = get_model(family, **args(folder))
    assert adapter.architectures(), f"{family} declares no network"
    good = inspect_weights(adapter)
    assert good.problems == [] and good.files >= 1, good.problems
    _narrower(family, folder, part, tmp_path)
    bad = inspect_weights(get_model(family, **args(folder)))
    target = str(folder / part) if part else str(folder)
    assert len(bad.problems) == 1, bad.problems
    assert bad.problems[0].startswith(target + ":") and "does not fit the architecture" in bad.problems[0]
    assert "shapes differ" in bad.problems[0]


def test_a_pipeline_index_naming_a_checkpoint_module_builds_nothing_of_it(tmp_path):
    """model_index.json entries outside diffusers / transformers (a checkpoint's own module) are
    never imported: the comparison skips them."""
    import json

    from icl.models.weights import pipeline_architectures

    folder = _sd(tmp_path / "sd")
    index = json.loads((folder / "model_index.json").read_text())
    index["unet"] = ["my_module", "MyUNet"]
    (folder / "model_index.json").write_text(json.dumps(index))
    names = sorted(a.folder.name for a in pipeline_architectures(folder))
    assert names == ["text_encoder", "vae"] and "my_module" not in sys.modules


def test_deprecated_attention_names_are_renamed_as_diffusers_loads_them(tmp_path):
    """An SD VAE saved with the pre-0.14 attention names (``query/key/value/proj_attn``, the
    layout of the original runwayml/stable-diffusion-v1-5 VAE) loads in diffusers
    (``ModelMixin._fix_state_dict_keys_on_load``) and so passes the check."""
    from safetensors.torch import load_file, save_file

    folder = _sd(tmp_path / "sd")
    f = folder / "vae" / "diffusion_pytorch_model.safetensors"
    tensors = load_file(str(f))
    old = {"to_q": "query", "to_k": "key", "to_v": "value", "to_out.0": "proj_attn"}
    renamed = {}
    for k, v in tensors.items():
        for new, legacy in old.items():
            if ".attentions." in k and f".{new}." in k:
                k = k.replace(f".{new}.", f".{legacy}.")
        renamed[k] = v
    assert renamed.keys() != tensors.keys()
    save_file(renamed, str(f), metadata={"format": "pt"})
    assert inspect_weights(get_model("diffusers-t2i", weights=str(folder))).problems == []


def test_pickled_weights_are_mapped_and_compared_and_a_folder_without_weights_fails(tmp_path):
    """LVM's decoder may come as ``pytorch_model.bin`` (torch.save of the state dict): the check
    maps it (``torch.load(mmap=True)``: names and shapes, no tensor read) and compares it as it
    compares safetensors, so a narrowed one fails; the legacy (pre-1.6) format cannot be mapped
    and is noted; a folder with no weights at all is a problem."""
    import torch
    from safetensors.torch import load_file

    folder = _lvm(tmp_path / "lvm")
    llm = folder / "llm"

    def check():
        return inspect_weights(get_model("lvm", weights=str(llm), vqgan_weights=str(folder / "vqgan")))

    state = load_file(str(llm / "model.safetensors"))
    (llm / "model.safetensors").unlink()
    torch.save(state, llm / "pytorch_model.bin")
    assert check().problems == []
    torch.save({k: (v[: max(1, v.shape[0] // 2)].clone() if v.ndim >= 2 else v) for k, v in state.items()},
               llm / "pytorch_model.bin")
    (problem,) = check().problems
    assert problem.startswith(f"{llm}:") and "shapes differ" in problem
    torch.save(state, llm / "pytorch_model.bin", _use_new_zipfile_serialization=False)
    ckpt = check()
    assert ckpt.problems == [] and any("legacy (pre-1.6) format" in n for n in ckpt.notes), ckpt.notes
    (llm / "pytorch_model.bin").unlink()
    assert check().problems == [f"{llm}: no weights (*.safetensors or *.bin) beside config.json"]


def _painter(folder: Path, **config):
    import json

    from _tiny import PAINTER, painter_checkpoint

    folder.mkdir(parents=True, exist_ok=True)
    path = painter_checkpoint(folder)
    return path, get_model("painter", weights=str(path), config=json.dumps({**PAINTER, **config}))


def _mae_vqgan(folder: Path, **config):
    import json

    from _tiny import MAE, mae_checkpoint

    folder.mkdir(parents=True, exist_ok=True)
    path = mae_checkpoint(folder, with_vae=False)  # taming's last.ckpt beside it, as published
    return path, get_model("mae-vqgan", weights=str(path), config=json.dumps({**MAE, **config}))


@pytest.mark.parametrize("build,label,narrower", [(_painter, "Painter", {"embed_dim": 16}),
                                                   (_mae_vqgan, "MAE-VQGAN", {"decoder_embed_dim": 8})],
                         ids=["painter", "mae-vqgan"])
def test_a_family_s_own_network_is_compared_with_its_mapped_torch_checkpoint(build, label, narrower, tmp_path):
    """Painter and MAE-VQGAN build their own torch networks (``CheckpointNetworkAdapter``) from the
    official ``torch.save`` checkpoints (``{"model": state_dict}``; MAE-VQGAN's VQGAN from
    taming's Lightning ``last.ckpt``): built on ``meta`` and compared with the mapped checkpoint
    by the rule ``load`` applies (``_load.state_mismatch``). The right checkpoint passes and is
    counted (parameters, bytes: the memory estimate's W); a checkpoint for another configuration
    fails with the error the load would raise; a truncated archive fails."""
    path, adapter = build(tmp_path / "good")
    good = inspect_weights(adapter)
    loaded = adapter.build()
    count = sum(v.numel() for k, v in loaded.state_dict().items())
    assert good.problems == [] and good.params == count and good.dtypes == ["F32"], good
    assert good.files == len(adapter.weight_files()) and good.stored_bytes > 4 * count * 0.9

    _, other = build(tmp_path / "other", **narrower)
    (problem,) = inspect_weights(other).problems
    assert problem.startswith(f"{tmp_path / 'other' / path.name}: not a {label} checkpoint for this configuration")
    with pytest.raises(Exception, match="not a .* checkpoint for this configuration") as raised:
        other.build()
    assert str(raised.value) == problem  # the check says what the load would

    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    truncated = inspect_weights(adapter)
    (problem,) = truncated.problems
    assert problem.startswith(f"{path}: not a complete torch checkpoint") and "truncated" in problem
    assert truncated.kinds == [CHECKPOINT_DAMAGED]  # from the error's type (the fix: copy it again)


def test_a_painter_checkpoint_re_saved_as_safetensors_is_compared_from_its_header(tmp_path):
    """Painter's state dict re-saved with safetensors (what the load error suggests for a pickle
    with objects): the check builds meta tensors from the header (no tensor read) and compares
    them by the same rule; the load agrees."""
    import torch
    from safetensors.torch import save_file

    path, _ = _painter(tmp_path / "pth")
    state = torch.load(path, weights_only=True)["model"]
    st = tmp_path / "painter.safetensors"
    save_file({k: v.contiguous() for k, v in state.items()}, str(st))
    import json

    from _tiny import PAINTER

    good = get_model("painter", weights=str(st), config=json.dumps(PAINTER))
    assert inspect_weights(good).problems == [] and good.build() is not None
    other = get_model("painter", weights=str(st), config=json.dumps({**PAINTER, "embed_dim": 16}))
    (problem,) = inspect_weights(other).problems
    assert problem.startswith(f"{st}: not a Painter checkpoint for this configuration")


def test_a_subclass_that_builds_its_own_way_is_not_compared(tmp_path):
    """A Painter subclass with its own ``build`` and no weight file (bench/gpu_run.py's random
    Painter) loads by its own rule: the check compares nothing and finds no problem (before, it
    asked the subclass for a checkpoint it does not have)."""
    import json

    from _tiny import PAINTER

    from icl.models.vicl.painter import Painter, PainterNet

    class RandomPainter(Painter):
        name = "painter-random-test"

        def model_files(self):
            return ()

        def build(self):
            return PainterNet(self.cfg)

    ckpt = inspect_weights(RandomPainter(config=json.dumps(PAINTER)))
    assert ckpt.problems == [] and ckpt.params == 0


def test_the_bytes_follow_a_dtype_argument_that_wins_over_precision(tmp_path):
    """SegGPT with ``dtype=bf16`` loads 2-byte weights (TorchAdapter.torch_dtype): check.json's
    precision and bytes say so (they read ``precision`` alone before: fp32, 4 bytes)."""
    import json

    from icl.run.__main__ import main

    folder = _seggpt(tmp_path / "seggpt")
    report = {}
    for dtype in ("fp32", "bf16"):
        out = tmp_path / dtype
        assert main(["vibe", "--fast", "--check", "--no-progress", "--device", "cpu", "--out", str(out),
                     "--models", f"seggpt:weights={folder},dtype={dtype}"]) == 0
        (entry,) = [m for m in json.loads((out / "check.json").read_text())["models"] if m["role"] == "model"]
        report[dtype] = entry
    assert report["fp32"]["precision"] == "fp32" and report["bf16"]["precision"] == "bf16"
    assert report["fp32"]["bytes"] == 2 * report["bf16"]["bytes"] == 4 * report["bf16"]["params"]


def test_the_memory_estimate_counts_the_batch_a_pipeline_takes_in_one_call(tmp_path):
    """qwen-image-edit's pipeline refuses a batch of prompts (``most_per_call = 1``): its peak is
    one request's whatever its ``batch_size``; diffusers-t2i's batch goes to the pipeline whole."""
    from icl.run.planning.check import memory_estimate

    folder = _sd(tmp_path / "sd")
    qwen = get_model("qwen-image-edit", weights=str(folder), batch_size=4)
    t2i = get_model("diffusers-t2i", weights=str(folder), batch_size=4)
    assert qwen.batch_size == t2i.batch_size == 4
    one = memory_estimate(qwen, 1000, 2)
    assert one["batch_size"] == 1 and list(one["peak_bytes"]) == ["1"]
    estimate = memory_estimate(t2i, 1000, 2)
    assert estimate["batch_size"] == 4 and list(estimate["peak_bytes"]) == ["1", "4"]
    assert estimate["peak_bytes"]["4"] - estimate["peak_bytes"]["1"] == 3 * estimate["activation_bytes_per_request"] > 0


def test_a_bare_pickle_is_not_called_torch_s_legacy_format_and_the_check_says_what_the_load_does(tmp_path):
    """Painter's checkpoint as three real files: ``torch.save(_use_new_zipfile_serialization=False)``
    (torch's legacy format: noted, the run reads it whole), ``pickle.dump`` of the same dict (a
    bare pickle: no zip, no legacy magic number) and a legacy file that pickles an object of a
    class ``weights_only`` does not accept. Told apart from the opcodes alone (nothing unpickled):
    the last two are problems, and the load refuses them with the same line."""
    import json
    import pickle

    import torch

    from _tiny import PAINTER

    path, _ = _painter(tmp_path / "zip")
    state = torch.load(path, weights_only=True)

    def adapter_of(name, save):
        f = tmp_path / name
        save(f)
        return f, get_model("painter", weights=str(f), config=json.dumps(PAINTER))

    legacy, adapter = adapter_of("legacy.pth", lambda f: torch.save(state, f, _use_new_zipfile_serialization=False))
    ckpt = inspect_weights(adapter)
    assert ckpt.problems == [] and any("legacy (pre-1.6) format" in n for n in ckpt.notes), ckpt
    assert adapter.build() is not None

    def dump(f):
        with open(f, "wb") as out:
            pickle.dump(state, out)

    bare, adapter = adapter_of("bare.pth", dump)
    (problem,) = inspect_weights(adapter).problems
    assert inspect_weights(adapter).kinds == [CHECKPOINT_REFUSED]  # the fix: save it again
    assert problem.startswith(f"{bare}: a bare pickle, not a torch.save checkpoint") and "legacy" not in \
        problem.split("(")[0], problem
    assert "0x1950a86a20f9469cfc6c" in problem
    with pytest.raises(Exception) as raised:
        adapter.build()
    assert str(raised.value) == problem  # the run refuses it with the same line

    objects = {**state, "trainer": Path("x")}  # a pathlib class: code weights_only refuses
    odd, adapter = adapter_of("objects.pth", lambda f: torch.save(objects, f, _use_new_zipfile_serialization=False))
    (problem,) = inspect_weights(adapter).problems
    assert problem.startswith(f"{odd}: torch's legacy (pre-1.6) format whose pickle names pathlib.") and \
        "does not accept" in problem, problem
    with pytest.raises(Exception) as raised:
        adapter.build()
    assert str(raised.value) == problem
