"""Where each release the converters read is published (docs/datasets.md, "Per release": the
same rows, tested), declared by the visual benchmark as its releases (``Vibe.releases``):
``python -m icl.data fetch NAME`` prints where to get one, its licence, the ``convert``
command and what it writes; it downloads nothing and never scrapes."""

from __future__ import annotations

from icl.data.convert.outputs import OUTPUTS, PAPER_COUNTS
from icl.data.release import Elsewhere


def _then(name: str) -> str:
    """What to do once ``name`` is downloaded: the ``convert`` command and what it writes (the
    paper's sample counts)."""
    writes = ", ".join(f"{d} ({PAPER_COUNTS[d]:,} samples)" for d in OUTPUTS[name])
    return (f"  python -m icl.data convert {name} RAW_DIR OUT_DIR\n"
            f"writes {writes} (docs/datasets.md, 'Per release')")


# name -> (what it is, licence, where it is published, what to download there)
_ROWS: dict[str, tuple[str, str, str, str]] = {
    "duke": ("Duke DME OCT, Chiu et al. 2015", "no licence stated", "people.duke.edu/~sf59/Chiu_BOE_2014_dataset.htm",
             "2015_BOE_Chiu.zip"),
    "ixi": ("IXI", "CC BY-SA 3.0", "brain-development.org/ixi-dataset", "IXI-T2.tar, IXI-PD.tar"),
    "atlantis": ("ATLANTIS", "custom licence", "github.com/smhassanerfani/atlantis", "the atlantis/ folder"),
    "seathru": ("Sea-thru", "CC BY-NC-SA 4.0", "kaggle.com/datasets/colorlabeilat/seathru-dataset", "sites D1..D5"),
    "suim": ("SUIM", "MIT", "irvlab.cs.umn.edu/resources/suim-dataset", "train_val/, TEST/"),
    "nyuv2": ("NYU Depth V2", "cite the paper", "cs.nyu.edu/~fergus/datasets/nyu_depth_v2.html",
              "nyu_depth_v2_labeled.mat and classMapping40.mat"),
    "deepcrack": ("DeepCrack (Liu et al. 2019)", "custom licence", "github.com/yhlleo/DeepCrack",
                  "dataset/DeepCrack.zip"),
    "cdd": ("CDD-11 (OneRestore)", "no licence stated", "github.com/gy65896/OneRestore", "CDD-11_test/"),
    "dram": ("DRAM", "cite the paper", "nadavc220.github.io/ssiap", "DRAM_processed"),
    "otp": ("OpenThermalPose", "MIT", "github.com/IS2AI/OpenThermalPose", "the dataset archive"),
    "rord": ("RORD", "MIT", "github.com/IIDA-AILab/RORD", "RORD-mini, its val split"),
    "llvip": ("LLVIP", "custom licence", "github.com/bupt-ai-cz/LLVIP", "LLVIP/"),
    "ap10k": ("AP-10K", "CC BY 4.0", "github.com/AlexTheBad/AP-10K", "ap-10k.zip"),
    "cub": ("CUB-200-2011", "cite the report", "vision.caltech.edu/datasets/cub_200_2011", "CUB_200_2011.tgz"),
}

#: The 14 releases of docs/datasets.md "Per release" (the same rows), each published off the Hub
RELEASES: dict[str, Elsewhere] = {name: Elsewhere(*row, then=_then(name)) for name, row in _ROWS.items()}
