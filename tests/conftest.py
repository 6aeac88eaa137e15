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


@pytest.fixture(autouse=True)
def _kernel_knobs(monkeypatch):
    """SEMISEG_KERNEL_KNOBS="NAME=int,..." runs every test with those module settings of
    semiseg.crf.kernels (e.g. a kernel variant before it becomes the rule)."""
    spec = os.environ.get("SEMISEG_KERNEL_KNOBS")
    if spec:
        from semiseg.crf import kernels

        for kv in filter(None, spec.split(",")):
            name, _, value = kv.partition("=")
            if not hasattr(kernels, name):
                raise ValueError(f"SEMISEG_KERNEL_KNOBS: no setting {name!r}")
            monkeypatch.setattr(kernels, name, int(value))
    yield
