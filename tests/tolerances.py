"""Float tolerances, one table for every test (integer outputs must match exactly)."""

import torch

# absolute tolerance by computation dtype, for scores compared with a float64 peer
ATOL = {
    torch.float64: 1e-6,
    torch.float32: 1e-4,
    torch.float16: 2e-3,
    torch.bfloat16: 2e-3,
}
