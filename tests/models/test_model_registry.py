import sys
import textwrap
from importlib import metadata

import numpy as np
import pytest

import icl._lazy as icl_lazy

from icl.models import Adapter, AnalogyRequest, UnknownModelError, get_model, list_models, register_model
from icl.models import registry


class Doubler(Adapter):
    name = "doubler"
    version = "3"
    batch_size = 4

    def predict(self, requests):
        return [np.minimum(r.query.astype(np.int32) * 2, 255).astype(np.uint8) for r in requests]


@pytest.fixture
def clean_registry():
    before = dict(registry._registered)
    yield
    registry._registered.clear()
    registry._registered.update(before)


def test_builtins_listed():
    assert {"oracle", "copy-target", "identity"} <= set(list_models())
    assert list_models() == sorted(list_models())


def test_unknown_model_lists_known_names():
    with pytest.raises(UnknownModelError) as info:
        get_model("no-such-model")
    msg = str(info.value)
    assert "no-such-model" in msg and "oracle" in msg and "copy-target" in msg and "identity" in msg


def test_register_string_target_is_lazy(clean_registry, tmp_path, monkeypatch):
    mod = tmp_path / "lazy_adapter_mod.py"
    mod.write_text(textwrap.dedent("""
        import numpy as np
        from icl.models import Adapter
        IMPORTED = True
        class Lazy(Adapter):
            name = "lazy"
            def predict(self, requests):
                return [r.query for r in requests]
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    register_model("lazy", "lazy_adapter_mod:Lazy")
    assert "lazy" in list_models()
    assert "lazy_adapter_mod" not in sys.modules  # registration and listing import nothing
    model = get_model("lazy")
    assert "lazy_adapter_mod" in sys.modules
    assert type(model).__name__ == "Lazy"
    monkeypatch.delitem(sys.modules, "lazy_adapter_mod")


def test_register_callable_and_kwargs(clean_registry):
    register_model("doubler", lambda batch_size=4: _with_batch(batch_size))
    assert get_model("doubler", batch_size=7).batch_size == 7


def _with_batch(n):
    m = Doubler()
    m.batch_size = n
    return m


def test_register_rejects_duplicates_and_bad_targets(clean_registry):
    with pytest.raises(ValueError, match="already registered"):
        register_model("oracle", "icl.models.builtin:Oracle")
    with pytest.raises(ValueError, match="module:attr"):
        register_model("x", "no_colon_here")
    with pytest.raises(TypeError):
        register_model("x", 42)
    register_model("oracle", Doubler, replace=True)
    assert isinstance(get_model("oracle"), Doubler)


def test_bad_factory_and_import_errors(clean_registry):
    register_model("not-an-adapter", lambda: object())
    with pytest.raises(TypeError, match="not-an-adapter"):
        get_model("not-an-adapter")
    register_model("missing-module", "icl_no_such_module_xyz:Thing")
    with pytest.raises(ImportError, match="missing-module"):
        get_model("missing-module")

    class BadPrecision(Doubler):
        precision = "int8"

    register_model("bad-precision", BadPrecision)
    with pytest.raises(ValueError, match="precision"):
        get_model("bad-precision")


def test_entry_point_from_dist_info(tmp_path, monkeypatch):
    # A real (temporary) installed distribution declaring the icl.models group.
    (tmp_path / "ep_adapter_mod.py").write_text(textwrap.dedent("""
        from icl.models import Adapter
        class FromEntryPoint(Adapter):
            name = "from-ep"
            version = "7"
            def predict(self, requests):
                return [r.query for r in requests]
    """))
    dist = tmp_path / "icl_test_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: icl-test-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[icl.models]\nfrom-ep = ep_adapter_mod:FromEntryPoint\n"
                                           "oracle = ep_adapter_mod:FromEntryPoint\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "from-ep" in list_models()
    assert "ep_adapter_mod" not in sys.modules
    model = get_model("from-ep")
    assert model.version == "7" and type(model).__name__ == "FromEntryPoint"
    # an entry point never shadows a built-in
    assert type(get_model("oracle")).__name__ == "Oracle"
    monkeypatch.delitem(sys.modules, "ep_adapter_mod")


def test_entry_point_monkeypatched(monkeypatch):
    eps = metadata.EntryPoints([metadata.EntryPoint("patched", "icl.models.builtin:Identity", "icl.models")])
    monkeypatch.setattr(icl_lazy, "entry_points",
                        lambda group: eps if group == "icl.models" else metadata.EntryPoints([]))
    assert "patched" in list_models()
    req = AnalogyRequest("flip", "d", "q", [], [], np.zeros((2, 3, 3), np.uint8), (2, 3))
    assert get_model("patched").predict([req])[0] is req.query


def test_broken_entry_point_names_model(monkeypatch):
    eps = metadata.EntryPoints([metadata.EntryPoint("broken", "icl_nowhere_mod:X", "icl.models")])
    monkeypatch.setattr(icl_lazy, "entry_points", lambda group: eps)
    with pytest.raises(ImportError, match="broken"):
        get_model("broken")
