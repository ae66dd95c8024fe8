"""Test set-up: without a GPU, the Triton kernels run under the Triton interpreter on
CPU tensors. TRITON_INTERPRET must be set before triton (and so flashtriton) is
imported, because @triton.jit decides at decoration time."""
import os

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("FLASHTRITON_AUTOTUNE", "0")  # tests use the fixed default tiles
# Launch plans (flashtriton/launchers/plans.py) replay a call's launches without the
# launcher functions that tests spy on or steer with monkeypatched constants: off here,
# and tests/test_plans.py holds every replay to the launchers' own results, bitwise.
os.environ.setdefault("FLASHTRITON_PLANS", "0")
# the GPU suite's xdist workers are other processes on the GPU, which would make "auto"
# leave the warp-specialized kernels (launchers/sharing.py): test what a process alone runs
os.environ.setdefault("FLASHTRITON_GPU_SHARED", "0")
# the CPU backend multiplies bf16 in bf16 whatever this host's bf16 speed ("auto" would probe it and may
# take the float32 kernels): the bf16 kernels are tested on every host; tests/test_cpu_bf16_mode.py
# tests the other modes by name
os.environ.setdefault("FLASHTRITON_CPU_BF16", "bf16")

import flashtriton  # noqa: E402  (after the environment is set)
from flashtriton import backends  # noqa: E402
from flashtriton.launchers import plans  # noqa: E402

DEVICE = "cuda" if HAS_CUDA else "cpu"


def kernel_backends():
    """The backends whose kernels this machine can test: Triton (on the GPU, or
    interpreted), and the CPU backend when it exists."""
    names = ["triton"]
    if backends.cpu_available() and DEVICE == "cpu":
        names.append("cpu")
    return names


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _seed_and_poison():
    torch.manual_seed(0)
    plans.clear()
    with flashtriton.memory.poison_outputs():
        yield
