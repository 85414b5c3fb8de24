"""The turbo colour table and depth bins (PROTOCOL §1.2-1.3), without torch: shared by the
torch front ends (:mod:`icl.ops.turbo`) and the numpy paths (:mod:`icl.ops._host`)."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np


# round(255 * turbo(i / 255)) for i = 0..255, RGB bytes in hex: matplotlib's 256-entry turbo
# colormap (matplotlib/_cm_listed.py, _turbo_data) quantised once. Written out so that encoding
# a depth map needs no matplotlib (0.3-0.4 s to import); tests/ops/test_turbo.py rebuilds it
# from matplotlib and compares.
_TURBO_HEX = (
    "30123b32154333184a341b51351e5836215f37246638276d392a733a2d793b2f803c32863d358b3e38913f3b973f3e9c"
    "4040a24143a74146ac4249b1424bb5434eba4451bf4454c34456c74559cb455ccf455ed34661d64664da4666dd4669e0"
    "466be3476ee64771e94773eb4776ee4778f0477bf2467df44680f64682f84685fa4687fb458afc458cfd448ffe4391fe"
    "4294ff4196ff4099ff3e9bfe3d9efe3ba0fd3aa3fc38a5fb37a8fa35abf833adf731aff52fb2f42eb4f22cb7f02ab9ee"
    "28bceb27bee925c0e723c3e422c5e220c7df1fc9dd1ecbda1ccdd81bd0d51ad2d21ad4d019d5cd18d7ca18d9c818dbc5"
    "18ddc218dec018e0bd19e2bb19e3b91ae4b61ce6b41de7b21fe9af20eaac22ebaa25eca727eea42aefa12cf09e2ff19b"
    "32f29835f39438f4913cf58e3ff68a43f78746f8844af8804ef97d52fa7a55fa7659fb735dfc6f61fc6c65fd6969fd66"
    "6dfe6271fe5f75fe5c79fe597dff5680ff5384ff5188ff4e8bff4b8fff4992ff4796fe4499fe429cfe409ffd3fa1fd3d"
    "a4fc3ca7fc3aa9fb39acfb38affa37b1f936b4f836b7f735b9f635bcf534bef434c1f334c3f134c6f034c8ef34cbed34"
    "cdec34d0ea34d2e935d4e735d7e535d9e436dbe236dde037dfdf37e1dd37e3db38e5d938e7d739e9d539ebd339ecd13a"
    "eecf3aefcd3af1cb3af2c93af4c73af5c53af6c33af7c13af8be39f9bc39faba39fbb838fbb637fcb336fcb136fdae35"
    "fdac34fea933fea732fea431fea130fe9e2ffe9b2dfe992cfe962bfe932afe9029fd8d27fd8a26fc8725fc8423fb8122"
    "fb7e21fa7b1ff9781ef9751df8721cf76f1af66c19f56918f46617f36315f26014f15d13f05b12ef5811ed5510ec530f"
    "eb500eea4e0de84b0ce7490ce5470be4450ae2430ae14109df3f08dd3d08dc3b07da3907d83706d63506d43305d23105"
    "d02f05ce2d04cc2b04ca2a04c82803c52603c32503c12302be2102bc2002b91e02b71d02b41b01b21a01af1801ac1701"
    "a91601a71401a41301a112019e10019b0f01980e01950d01920b018e0a018b09028808028507028106027e05027a0403"
)


@lru_cache(maxsize=1)
def turbo_table() -> np.ndarray:
    """uint8 ``[256, 3]``, read-only: ``round(255 * turbo(i / 255))`` from matplotlib's turbo map."""
    table = np.frombuffer(bytes.fromhex("".join(_TURBO_HEX)), np.uint8).reshape(256, 3)
    table.flags.writeable = False
    return table


def __getattr__(name: str) -> Any:
    if name == "TURBO_TABLE":  # built on first access (matplotlib's colormap)
        return turbo_table()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def depth_of_bin(d_min: float, d_max: float) -> np.ndarray:
    """float32 ``[256]``: ``d_min + (bin + 0.5) / 256 * (d_max - d_min)``, computed in float64."""
    return (d_min + (np.arange(256) + 0.5) / 256.0 * (d_max - d_min)).astype(np.float32)


def check_range(d_min: Any, d_max: Any) -> tuple[float, float]:
    """``(d_min, d_max)`` as floats; TypeError/ValueError naming the bad one."""
    for name, v in (("d_min", d_min), ("d_max", d_max)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"{name}: expected a real number, got {type(v).__name__}")
        if not math.isfinite(float(v)):
            raise ValueError(f"{name}: expected a finite value, got {v}")
    if not float(d_max) > float(d_min):
        raise ValueError(f"d_min, d_max: expected d_max > d_min, got {d_min}, {d_max}")
    return float(d_min), float(d_max)
