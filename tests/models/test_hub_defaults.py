"""``weights=hf:default``: each family's official Hub repository (icl.models.hub.OFFICIAL), resolved
through the one parser against the Hub of our own (hub_server.py) holding a repository of that name;
a family whose weights are not on the Hub says where they are; docs/models.md lists the same table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.models.hub_server import REPO, hf_env, hub_llava, server  # noqa: F401 (fixtures)

from icl.models import hub
from icl.models.hub import OFFICIAL, HubError
from icl.models.weights import resolve_weights

ROOT = Path(__file__).resolve().parents[2]


def test_every_default_goes_through_the_one_parser():
    for (family, argument), entry in OFFICIAL.items():
        if entry.ref is not None:
            ref = hub.parse_ref(entry.ref)
            assert ref.revision is None or ref.pinned, (family, argument)  # main (pinned at resolution) or a commit
            assert hub.expand_default("hf:default", family, argument) == entry.ref
        else:
            assert entry.where, (family, argument)  # says where the weights live


def test_hf_default_resolves_to_the_table_entry(hf_env, server, hub_llava):
    repo = hub.parse_ref(OFFICIAL[("seggpt", "weights")].ref).repo_id
    commit = server.commit_folder(repo, hub_llava[0])
    folder = resolve_weights("seggpt", "hf:default", "config.json").parent
    snap = hub.snapshot_of(folder)
    assert snap.ref.repo_id == repo == "BAAI/seggpt-vit-large" and snap.commit == commit


def test_hf_default_in_a_run_records_the_official_repository_at_its_commit(hf_env, server, hub_llava):
    from icl.run.planning.config import ModelSpec
    from icl.run.planning.models import make_model

    repo = hub.parse_ref(OFFICIAL[("lvm", "weights")].ref).repo_id
    llm = server.commit_folder(repo, hub_llava[0])
    vq = server.commit("Emma02/vqvae_ckpts", {"config.json": b"{}", "pytorch_model.bin": b"pickled", "README.md": b"#"})
    model = make_model(ModelSpec("lvm", {"weights": "hf:default", "vqgan_weights": "hf:default"}), "cpu")
    assert model.identity["args"]["weights"] == f"hf:{repo}@{llm}"  # never 'hf:default' nor a branch
    assert model.identity["args"]["vqgan_weights"] == f"hf:Emma02/vqvae_ckpts@{vq}"
    vq_files = model.identity["weights"][f"hf:Emma02/vqvae_ckpts@{vq}"]["files"]
    assert "pytorch_model.bin" in vq_files and "README.md" not in vq_files  # the pickle the family names


def test_downloads_allowed_uses_the_default_when_nothing_is_given(hf_env, server, hub_llava, monkeypatch):
    server.commit_folder("BAAI/seggpt-vit-large", hub_llava[0])
    monkeypatch.delenv("ICL_WEIGHTS_DIR", raising=False)
    with pytest.raises(Exception, match="hf:default"):
        resolve_weights("seggpt", None, "config.json")  # no flag: never downloads, names the default
    monkeypatch.setenv("ICL_HUB_DEFAULTS", "1")
    folder = resolve_weights("seggpt", None, "config.json").parent
    assert hub.snapshot_of(folder).ref.repo_id == "BAAI/seggpt-vit-large"


def test_a_family_without_a_hub_default_says_where_its_weights_are(hf_env, server):
    with pytest.raises(HubError, match="Google Drive") as info:
        resolve_weights("mae-vqgan", "hf:default", "checkpoint-1000.pth")
    assert "\n" not in str(info.value)
    with pytest.raises(HubError, match="OneDrive"):
        hub.expand_default("hf:default", "delvm")
    with pytest.raises(HubError, match="no official weights known"):
        hub.expand_default("hf:default", "no-such-family")
    with pytest.raises(HubError, match="official weights"):
        hub.parse_ref("hf:default")  # not a repository: only a family expands it
    assert server.requests == []  # nothing was asked of the Hub


def test_an_unknown_default_is_a_config_error_in_a_run(hf_env, server):
    from icl.run.planning.config import ModelSpec
    from icl.run.errors import ConfigError
    from icl.run.planning.models import make_model

    with pytest.raises(ConfigError, match="hf-vlm.*no Hub default.*llava"):
        make_model(ModelSpec("hf-vlm", {"weights": "hf:default"}), "cpu")


ROW = re.compile(r"^\| `(?P<family>[a-z0-9-]+)` \| `(?P<arg>[a-z_]+)` \| (?P<default>[^|]+) \|")


def _docs_table(path: Path) -> dict[tuple[str, str], object]:
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m:
            cell = m.group("default").strip()
            ref = re.fullmatch(r"`(hf:[^`]+)`", cell)
            assert ref or cell.startswith("none"), line
            rows[(m.group("family"), m.group("arg"))] = ref.group(1) if ref else None
    return rows


def test_the_docs_tables_list_every_family_as_the_code_does():
    models = _docs_table(ROOT / "docs" / "models.md")
    assert models == {key: entry.ref for key, entry in OFFICIAL.items()}
    generators = _docs_table(ROOT / "docs" / "generators.md")
    assert generators and all(models[k] == v for k, v in generators.items())
    for family in ("diffusers-t2i", "janus", "flux-kontext", "qwen-image-edit", "clip-judge"):
        assert (family, "weights") in generators
