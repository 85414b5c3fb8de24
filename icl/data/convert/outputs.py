"""What each converter writes and the paper's sample count of each dataset: plain data, a leaf
module that the converters' shared code and the command line both read."""

from __future__ import annotations

CDD_TYPES = ("haze", "haze_rain", "haze_snow", "low", "low_haze", "low_haze_rain", "low_haze_snow", "low_rain",
             "low_snow", "rain", "snow")

# NAME -> the datasets it writes (each needs its completion manifest to count as present)
OUTPUTS: dict[str, tuple[str, ...]] = {
    "ap10k": ("ap10k",), "atlantis": ("atlantis",), "cdd": ("cdd", *(f"cdd-{t}" for t in CDD_TYPES)),
    "cub": ("cub",), "deepcrack": ("deepcrack",), "dram": ("dram",), "duke": ("duke-layers", "duke-fluid"),
    "ixi": ("ixi-axial", "ixi-coronal", "ixi-sagittal"), "llvip": ("llvip",), "nyuv2": ("nyuv2",), "otp": ("otp",),
    "rord": ("rord",), "seathru": ("seathru",), "suim": ("suim",),
}

# dataset -> the paper's sample count after its filters (appendix A.3, Table 6)
PAPER_COUNTS: dict[str, int] = {
    "ap10k": 5961, "atlantis": 5195, "cdd": 200, **{f"cdd-{t}": 200 for t in CDD_TYPES}, "cub": 6000,
    "deepcrack": 537, "dram": 718, "duke-fluid": 78, "duke-layers": 110, "ixi-axial": 578, "ixi-coronal": 578,
    "ixi-sagittal": 578, "llvip": 608, "nyuv2": 1449, "otp": 1950, "rord": 343, "seathru": 1205, "suim": 1635,
}
