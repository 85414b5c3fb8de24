import pytest

from icl.data.registry import get_dataset
from tests.tasks.helpers import BUILTINS


@pytest.fixture(scope="session")
def builtin_root(tmp_path_factory):
    """One data root with the fast built-ins, generated once per test session."""
    root = tmp_path_factory.mktemp("icl-data-tasks")
    for name in BUILTINS:
        get_dataset(name, root=root, fast=True)
    return root
