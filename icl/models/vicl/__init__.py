"""Visual in-context models: image analogies (weight-free), Painter, MAE-VQGAN, LVM and DeLVM.

One module per model family; shared building blocks: :mod:`canvas` (request checks, resizing,
canvases and grouping), :mod:`_vit` (ViT blocks), :mod:`_vqgan` (the taming-transformers
VQGAN). Modules import torch and the model code only when a model is asked for.
"""
