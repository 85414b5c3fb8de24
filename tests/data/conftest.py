import pytest

from icl.data.registry import get_dataset


@pytest.fixture(scope="session")
def builtin_root(tmp_path_factory):
    """One data root with the fast built-ins, generated once per test session."""
    root = tmp_path_factory.mktemp("icl-data")
    for name in ("scenes-a", "scenes-b", "photos"):
        get_dataset(name, root=root, fast=True)
    return root
