import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # so tests can import bruteforce


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


# Without a GPU the Triton kernels run in triton's interpreter, which reads this variable
# when triton is first imported: set it here, before any test module can import triton.
if not _cuda():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config, items):
    if _cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# A kernel variant before it becomes the rule: SEMISEG_TRITON_TUNING="field=value,..." runs
# every test with those fields of the Triton backend's default Tuning
# (semiseg/crf/triton/schedule.py reads it once, at import).
