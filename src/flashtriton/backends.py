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
import functools
import importlib

import torch

from . import envvars

NAMES = ("triton", "cpu", "reference")
_override: list[str] = []
_CPU = torch.device("cpu")
# FLASHTRITON_BACKEND now (envvars.reader: one dict lookup; envvars.value encodes the name
# on every call, ~0.3 us of a replayed decode step on the CI CPU, 2026-12-01)
_env_backend = envvars.reader(("FLASHTRITON_BACKEND",))


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


_triton = None          # the triton module, imported at the first _interpreting()


def _interpreting() -> bool:
    """triton.knobs.runtime.interpret (the module bound once, not an import statement a
    call: ~0.2 us of select() for CPU tensors)."""
    global _triton
    if _triton is None:
        import triton
        _triton = triton
    return bool(_triton.knobs.runtime.interpret)


def default_for(device: torch.device) -> str:
    return _default_for_type(device.type)


def _default_for_type(kind: str) -> str:
    if kind == "cuda":
        return "triton"
    if kind == "cpu":
        return "cpu" if cpu_available() else "reference"
    return "reference"


@functools.cache
def cpu_available() -> bool:
    """True once the package flashtriton.cpu exists (a folder without __init__.py, a
    namespace package, does not count). Cached: select() asks on every CPU call, and a
    find_spec cost ~40 us there right after other work (session 44, bench/wip/cpu-decode-8k.md)."""
    spec = importlib.util.find_spec("flashtriton.cpu")
    return spec is not None and spec.origin is not None and spec.origin.endswith("__init__.py")


def select(device: torch.device) -> str:
    """The backend for tensors on `device`: the innermost use_backend(), else
    FLASHTRITON_BACKEND, else the device's default. Raises if it cannot run there."""
    # (not traced: under torch.compile the API reads the variable itself, for dynamo's guards)
    # (device.type read once: it builds a new str each time, ~0.15 us on the CI CPU and ~22 us
    # with cold caches right after other work, where comparing with a torch.device costs ~2:
    # the CPU decode's bench row, session 56, bench/NOTES.md)
    kind = "cpu" if device == _CPU else device.type
    name = _override[-1] if _override else _env_backend()[0] or _default_for_type(kind)
    if name not in NAMES:
        raise ValueError(f"FLASHTRITON_BACKEND: must be one of {NAMES}, got {name!r}")
    if name == "triton":
        if kind != "cuda" and not (kind == "cpu" and _interpreting()):
            raise ValueError(f"backend 'triton': needs CUDA tensors (or CPU tensors with TRITON_INTERPRET=1), "
                             f"got tensors on {device}")
    elif name == "cpu":
        if kind != "cpu":
            raise ValueError(f"backend 'cpu': needs CPU tensors, got tensors on {device}")
        if not cpu_available():
            raise RuntimeError("backend 'cpu': the package flashtriton.cpu is missing from this installation "
                               "(a partial install or source tree); reinstall flashtriton")
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
