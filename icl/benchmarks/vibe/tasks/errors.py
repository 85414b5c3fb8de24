"""What both the host and the device scoring paths of a task need: the error of an unscorable
output, and a torch-free tensor test. A leaf module, so the device path (``_device``) and the
task base class do not import each other."""

from __future__ import annotations

from typing import Any


class PredictionError(ValueError):
    """A model output that cannot be scored (wrong shape, dtype, range, NaN). ``index`` is its
    position in the batch passed to :meth:`Task.evaluate`; the runner adds model/task/sample."""

    def __init__(self, index: int, message: str):
        self.index = index
        self.message = message
        super().__init__(f"prediction {index}: {message}")


def is_tensor(x: Any) -> bool:
    """Whether ``x`` is a torch tensor, without importing torch when nothing has (nor using one
    that another thread is still importing: :func:`icl._modules.imported`)."""
    from icl._modules import imported

    torch_mod = imported("torch")
    return torch_mod is not None and isinstance(x, torch_mod.Tensor)
