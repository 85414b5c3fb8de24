"""The one stop flag: SIGTERM and SIGINT (Ctrl-C) stop a run between batches, a download between
chunks and a wait between polls; a second signal stops at once. Low in the package (signal and
threading alone), so the runner, the Hub client and the helper processes share it."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_pending: list[int] = []  # signals received and not yet acted on (main thread only)


def _request_stop(signum: int, frame: Any) -> None:
    first = not _pending
    _pending.append(signum)
    if not first:  # a second signal: stop now, wherever the run is
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name} (second)")


def check_stop() -> None:
    """Raise ``KeyboardInterrupt`` naming the signal when SIGTERM or SIGINT arrived inside
    :func:`stop_on_signals`; a no-op otherwise."""
    if _pending:
        raise KeyboardInterrupt(f"signal {signal.Signals(_pending[0]).name}")


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGTERM and SIGINT set the stop flag inside the block (main thread only) and the block
    ends with ``KeyboardInterrupt`` if one arrived; handlers and flag are restored after.
    Nested inside another such block (a download inside a run) it installs and clears nothing
    (the outer block's flag holds; it still ends with ``KeyboardInterrupt`` if a signal is
    pending); outside the main thread (where Python delivers no signal) it is a plain block."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if all(signal.getsignal(s) is _request_stop for s in STOP_SIGNALS):  # nested: the outer flag
        yield
        check_stop()
        return
    previous = {s: signal.signal(s, _request_stop) for s in STOP_SIGNALS}
    _pending.clear()
    try:
        yield
        check_stop()  # a signal after the last check in the block is not lost
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _pending.clear()


#: the name the command line has used since SIGTERM first stopped a run like Ctrl-C
sigterm_as_interrupt = stop_on_signals
