"""icl: fast, reproducible evaluation of in-context learners.

Importing ``icl`` never needs the native build or a GPU: backends are probed lazily.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
