"""The one place that chooses the backend.

  triton     the Triton kernels (flashtriton.kernels). CUDA tensors use it by default;
             CPU tensors can use it under the Triton interpreter (TRITON_INTERPRET=1),
             which is how CI runs the kernels.
  cpu        the CPU implementation of the same algorithm (flashtriton.cpu).
  reference  plain PyTorch math with the same semantics (flashtriton.reference), any
             device and dtype. The tests' truth.

Choose explicitly with `with flashtriton.use_backend("reference"): ...` or the
environment variable FLASHTRITON_BACKEND; otherwise the tensor's device decides.
Every backend is one module with the same functions: see flashtriton.triton_backend.
"""
from __future__ import annotations

import contextlib
import importlib

import torch

from . import envvars

NAMES = ("triton", "cpu", "reference")
_override: list[str] = []


@contextlib.contextmanager
def use_backend(name: str):
    """Route every flashtriton call inside the block to backend `name`."""
    if name not in NAMES:
        raise ValueError(f"backend: must be one of {NAMES}, got {name!r}")
    _override.append(name)
    try:
        yield
    finally:
        _override.pop()


def _interpreting() -> bool:
    import triton
    return bool(triton.knobs.runtime.interpret)


def default_for(device: torch.device) -> str:
    if device.type == "cuda":
        return "triton"
    if device.type == "cpu":
        return "cpu" if cpu_available() else "reference"
    return "reference"


def cpu_available() -> bool:
    """True once the package flashtriton.cpu exists (a folder without __init__.py, a
    namespace package, does not count)."""
    spec = importlib.util.find_spec("flashtriton.cpu")
    return spec is not None and spec.origin is not None and spec.origin.endswith("__init__.py")


def select(device: torch.device) -> str:
    """The backend for tensors on `device`: the innermost use_backend(), else
    FLASHTRITON_BACKEND, else the device's default. Raises if it cannot run there."""
    # (not traced: under torch.compile the API reads the variable itself, for dynamo's guards)
    name = _override[-1] if _override else envvars.value("FLASHTRITON_BACKEND") or default_for(device)
    if name not in NAMES:
        raise ValueError(f"FLASHTRITON_BACKEND: must be one of {NAMES}, got {name!r}")
    if name == "triton" and device.type != "cuda" and not (device.type == "cpu" and _interpreting()):
        raise ValueError(f"backend 'triton': needs CUDA tensors (or CPU tensors with TRITON_INTERPRET=1), "
                         f"got tensors on {device}")
    if name == "cpu" and device.type != "cpu":
        raise ValueError(f"backend 'cpu': needs CPU tensors, got tensors on {device}")
    if name == "cpu" and not cpu_available():
        raise NotImplementedError("backend 'cpu': the CPU backend is not implemented yet")
    return name


_modules: dict = {}


def get(name: str):
    """The module implementing backend `name` (imported on first use, then cached: an
    import statement costs ~3 us a call even when the module is loaded, CI CPU)."""
    module = _modules.get(name)
    if module is None:
        module = importlib.import_module({"triton": ".triton_backend", "cpu": ".cpu"}.get(name, ".reference_backend"),
                                         __package__)
        _modules[name] = module
    return module
