"""Whether other processes share a GPU (NVML), for the warp-specialization policy
(launchers/policy.py) and the launch plans' key (launchers/plans.py)."""
from __future__ import annotations

import time
import warnings

import torch

from .. import envvars

# The warp-specialized kernels under GPU sharing. H200, triton 3.6.0, driver 580, 2026-11-30
# (bench/gpu/s17_ws_off_stress.py, bench/NOTES.md "Session 17"): three processes time-
# slicing one GPU, each running forward+backward at B = 1, H = 16, N = 16k, D = 128:
# 1982 of 2025 calls had NaN (out or gradients) with these kernels, 0 of 1677 with
# FLASHTRITON_WARP_SPEC=0 (fwd.py / bwd.py); one process alone: never. Neither other
# virtual addresses per process nor a descriptor scratch that is not reused changed it;
# the suspect is the preemption of their specialized warpgroups (setmaxnreg). So "auto"
# leaves them when NVML reports other processes on the GPU, re-checked every
# GPU_SHARED_CHECK_S seconds (without NVML, nvidia-ml-py, it cannot tell: README).
# FLASHTRITON_GPU_SHARED=0 / 1 overrides the check (auto: NVML): the test suite sets 0, its
# parallel workers being other processes on the GPU, so that it tests the kernels "auto"
# takes in a process alone.
GPU_SHARED_CHECK_S = 2.0
_gpu_shared_seen: dict = {}     # device index -> (time checked, shared)
_warned: set = set()            # devices warned about once


def gpu_shared(device) -> bool:
    """Whether NVML lists more than one compute process on device (this one included),
    cached for GPU_SHARED_CHECK_S seconds; False where NVML is not available (and for
    devices that are not CUDA GPUs). FLASHTRITON_GPU_SHARED=0 / 1 answers instead."""
    if device.type != "cuda":
        return False
    flag = envvars.value("FLASHTRITON_GPU_SHARED", "auto")
    if flag != "auto":
        if flag not in ("0", "1"):
            raise ValueError(f"FLASHTRITON_GPU_SHARED: must be auto, 0 or 1, got {flag!r}")
        return flag == "1"
    idx = device.index if device.index is not None else torch.cuda.current_device()
    now = time.monotonic()
    seen = _gpu_shared_seen.get(idx)
    if seen is not None and now - seen[0] < GPU_SHARED_CHECK_S:
        return seen[1]
    try:
        import pynvml
        handle = torch.cuda._get_pynvml_handler(idx)
        shared = len(pynvml.nvmlDeviceGetComputeRunningProcesses(handle)) > 1
    except Exception:           # no nvidia-ml-py, no NVML, or an NVML error: cannot tell
        shared = False
    if shared and idx not in _warned:
        _warned.add(idx)
        warnings.warn(f"flashtriton: other processes use GPU {idx}; the warp-specialized kernels are off while "
                      "they do (they gave NaN under time-slicing; README, Limitations). CUDA graphs captured "
                      "before keep the kernels they captured.", RuntimeWarning, stacklevel=2)
    _gpu_shared_seen[idx] = (now, shared)
    return shared
