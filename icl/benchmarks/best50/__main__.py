"""``python -m icl.benchmarks.best50 ...`` (see :mod:`icl.benchmarks.best50.cli`)."""

from icl.benchmarks.best50.cli import main

raise SystemExit(main())
