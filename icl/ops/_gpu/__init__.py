"""GPU (triton / numba.cuda) implementations of the ops; each module registers itself on import.

Nothing here imports triton or numba at module level.
"""
