"""Autograd inside a ``torch.library`` op's implementation.

An op's implementation runs below the autograd dispatch keys, so tensors created there record
no history even under ``torch.enable_grad()``. The backward ops of ``ssim`` and ``lpips``
differentiate their pure-torch reference there: kept opaque to ``torch.compile``, they trace
as one node instead of an autograd call that the compiler cannot follow.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def recording() -> Iterator[None]:
    """Re-enable autograd recording for the enclosed block (inside an op implementation)."""
    include = torch._C._dispatch_tls_local_include_set()
    exclude = torch._C._dispatch_tls_local_exclude_set().remove(torch._C.DispatchKey.AutogradFunctionality)
    with torch._C._ForceDispatchKeyGuard(include, exclude), torch.enable_grad():
        yield
