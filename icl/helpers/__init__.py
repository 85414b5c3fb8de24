"""Helper processes: work that needs a heavy library, done beside the run instead of in it.

The package: :mod:`icl.helpers.pools` (the run's side: pools, jobs, deferred values),
:mod:`icl.helpers.child` (a helper's side: warm-up, siblings, its loop) and
:mod:`icl.helpers.wire` (the frames between them, job targets, a helper's command line).

Two kinds of work would otherwise sit on a run's critical path: drawing figures (matplotlib is
Python-bound, so threads do not help) and LPIPS on the host (the first call imports torch,
1-1.5 s, for an evaluation that needs nothing else of it). Each has a named pool of helper
processes (:data:`POOLS`); :func:`warm` starts a pool when a run begins, so that the helpers'
interpreter start and imports overlap the run's own work, and :func:`submit` hands them jobs.

- A job is a module-level function, given as the function or as ``"module:name"`` (then the
  caller never imports its module: the point of the LPIPS helper), and picklable arguments.
- A pool's first helper starts from a fresh interpreter (``python -c``), never by forking the
  run: a forked copy of a process that runs torch or OpenMP threads can hang. It runs the pool's
  warm-up (imports, caches) before its first job. In a pool that says ``fork``, the other helpers
  are forked from that first one right after its warm-up, so the imports are paid once (on two
  cores, a second matplotlib import was a sixth of a figure run's CPU time): such a pool's
  helpers run one thread each (OpenMP, BLAS and OpenCV told so), and a helper that has more
  threads than that after its warm-up starts the others fresh instead. Helpers see the
  parent's ``sys.path`` and environment; they draw with matplotlib's defaults (a notebook's
  changed ``rcParams`` are not carried: figures are the same bytes whoever draws them).
- Helpers collect garbage less often than Python's default and freeze what their warm-up made
  (collections were 10-15% of torch's and matplotlib's imports and of drawing).
- A pool may be started on a guess, before its user is even imported (``warm(name,
  guess=True)``: the command line, from the benchmark's name); :func:`settle_guesses` stops the
  guessed pools a run does not need. Stopping a helper without a job does not wait for it: it is
  terminated (a warm-up in progress unwinds, its temporary files removed).
- Where no helper can serve (``ICL_HELPERS=0``, a single CPU, a helper that died or could not
  start, a job that cannot be pickled), the job runs in the calling process, with the same
  code and result: nothing is lost to the pool. An exception raised by the job itself is raised
  in the caller, as the same type where it can be pickled (else :class:`HelperError` with the
  helper's traceback).

- A busy helper (warming up, running a job) sends a heartbeat every :data:`HEARTBEAT_S`, and
  every message is a checked frame. A helper silent for ``ICL_HELPER_SILENCE_S`` (stopped,
  frozen), one that takes none of a job's input for as long, writes corrupt framing, or runs one
  job past ``ICL_HELPER_DEADLINE_S`` is killed with one line on standard error, and its jobs run
  in the caller. Waiting for a helper looks at the run's stop flag (:mod:`icl._signals`), so
  SIGTERM ends a run waiting for a stuck helper. Jobs run in the caller one at a time.

``ICL_HELPERS``: ``0`` runs every job in the calling process.
"""

from __future__ import annotations

from icl.helpers.pools import (ENV, SILENCE_S, DEADLINE_S, PoolSpec, POOLS, HelperLost, HelperError,
                               pool_size, Job, say, ONE_THREAD, HelperPool, Deferred, resolved, pending,
                               pool, started, stop, warm, settle_guesses, submit, busy_seconds)
from icl.helpers.wire import HEARTBEAT_S, Target

__all__ = ['DEADLINE_S', 'Deferred', 'ENV', 'HEARTBEAT_S', 'HelperError', 'HelperLost', 'HelperPool', 'Job',
           'ONE_THREAD', 'POOLS', 'PoolSpec', 'SILENCE_S', 'Target', 'busy_seconds', 'pending', 'pool',
           'pool_size', 'resolved', 'say', 'settle_guesses', 'started', 'stop', 'submit', 'warm']
