"""``python -m icl.benchmarks.best50 ...`` is ``python -m icl.run best50 ...``."""

import sys

from icl.run.__main__ import main

raise SystemExit(main(["best50", *sys.argv[1:]]))
