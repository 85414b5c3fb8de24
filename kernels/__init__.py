"""Triton kernels, shipped inside the wheel as ``icl.kernels``. Imported only on demand."""
