"""launchers/sharing.py: whether other processes share the GPU (NVML), which makes the
"auto" policy leave the warp-specialized kernels (their NaN under time-slicing: README
limitations, bench/NOTES.md "Session 17")."""
import sys
import types

import torch

from flashtriton.launchers import sharing


def _fake_nvml(monkeypatch, processes):
    calls = []
    fake = types.SimpleNamespace(nvmlDeviceGetComputeRunningProcesses=lambda h: calls.append(h) or processes())
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(torch.cuda, "_get_pynvml_handler", lambda idx: ("handle", idx))
    monkeypatch.setattr(sharing, "_gpu_shared_seen", {})
    monkeypatch.delenv("FLASHTRITON_GPU_SHARED", raising=False)   # conftest sets 0
    return calls


def test_gpu_shared_counts_processes_and_caches(monkeypatch):
    n = [1]
    calls = _fake_nvml(monkeypatch, lambda: list(range(n[0])))
    dev = torch.device("cuda", 0)
    clock = [100.0]
    monkeypatch.setattr(sharing.time, "monotonic", lambda: clock[0])
    assert sharing.gpu_shared(dev) is False                      # this process alone
    n[0] = 3
    assert sharing.gpu_shared(dev) is False and len(calls) == 1  # cached for GPU_SHARED_CHECK_S
    clock[0] += sharing.GPU_SHARED_CHECK_S
    assert sharing.gpu_shared(dev) is True and calls[-1] == ("handle", 0)
    assert sharing.gpu_shared(torch.device("cuda", 1)) is True and calls[-1] == ("handle", 1)


def test_gpu_shared_without_nvml_says_no(monkeypatch):
    def broken():
        raise RuntimeError("NVML: driver not loaded")
    _fake_nvml(monkeypatch, broken)
    assert sharing.gpu_shared(torch.device("cuda", 0)) is False
    monkeypatch.setitem(sys.modules, "pynvml", None)             # not installed: import fails
    monkeypatch.setattr(sharing, "_gpu_shared_seen", {})
    assert sharing.gpu_shared(torch.device("cuda", 0)) is False


def test_gpu_shared_environment_override(monkeypatch):
    """FLASHTRITON_GPU_SHARED=0 / 1 answers without NVML; anything else but auto is a
    ValueError naming the variable."""
    import pytest
    calls = _fake_nvml(monkeypatch, lambda: [1, 2, 3])
    dev = torch.device("cuda", 0)
    monkeypatch.setenv("FLASHTRITON_GPU_SHARED", "0")
    assert sharing.gpu_shared(dev) is False and not calls
    monkeypatch.setenv("FLASHTRITON_GPU_SHARED", "1")
    assert sharing.gpu_shared(dev) is True and not calls
    monkeypatch.setenv("FLASHTRITON_GPU_SHARED", "auto")
    assert sharing.gpu_shared(dev) is True and len(calls) == 1
    monkeypatch.setenv("FLASHTRITON_GPU_SHARED", "yes")
    with pytest.raises(ValueError, match="FLASHTRITON_GPU_SHARED"):
        sharing.gpu_shared(dev)
