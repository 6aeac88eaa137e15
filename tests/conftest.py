import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # so tests can import bruteforce


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
