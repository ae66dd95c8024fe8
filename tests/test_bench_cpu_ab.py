"""The CPU decode A/B tool (bench/cpu/s45_decode_memo_ab.py): what it compares must differ only in the code under
test. Session 56 found that the old revision's kvcache module (loaded as a separate module) kept its own value-checks
switch on while the tool entered only the working tree's value_checks(False), so the old side ran the value checks
in every call - identical code read ~5-7% in favour of "new"."""
import os
import subprocess
import sys

import pytest
import torch

from flashtriton import backends, kvcache

from conftest import DEVICE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.skipif(not backends.cpu_available() or DEVICE != "cpu", reason="the CPU backend's tool")


def _has_git_head():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True).returncode == 0
    except OSError:
        return False


@pytest.mark.skipif(not _has_git_head(), reason="the tool loads the old revision with git show")
def test_regression_ab_tool_sides_skip_value_checks(monkeypatch, capsys):
    sys.path.insert(0, os.path.join(ROOT, "bench", "cpu"))
    try:
        import s42_decode_ab
        import s45_decode_memo_ab as tool
    finally:
        sys.path.pop(0)
    old_kv = tool.old_module("kvcache.py", "flashtriton._kvcache_old_test", "HEAD")
    old_dec = tool.old_module("cpu/decode.py", "flashtriton.cpu._decode_old_test", "HEAD")
    import flashtriton.cpu as fcpu
    checked = {"old": 0, "new": 0}
    for side, mod in (("old", old_kv), ("new", kvcache)):
        real = mod._check_values
        monkeypatch.setattr(mod, "_check_values", lambda *a, _s=side, _r=real, **k: checked.__setitem__(
            _s, checked[_s] + 1) or _r(*a, **k))
    monkeypatch.setattr(s42_decode_ab, "wait_quiet", lambda *a, **k: 0.0)
    monkeypatch.setattr(tool, "read_bandwidth", lambda *a, **k: 1.0)
    monkeypatch.setattr(fcpu, "kvcache_fwd", fcpu.kvcache_fwd)     # the tool swaps it per call
    impls = {"old": (old_kv, old_dec.kvcache_fwd), "new": (kvcache, fcpu.kvcache_fwd)}
    tool.case(torch.bfloat16, 256, impls, 2, "none")
    assert checked == {"old": 0, "new": 0}
    assert "every output == old's bitwise: True" in capsys.readouterr().out


def test_regression_layer_probe_variants_match_the_api():
    """bench/cpu/s56_decode_layers_probe.py's variants call the compiled launch and the kernel directly; session 56
    extended CompiledLaunch.run() (k_new / v_new) and the probe's `compiled` variant stopped running (a TypeError
    found in session 57). Every variant must run and give the API's output bitwise."""
    from flashtriton.cpu import decode
    if not decode.compiled_ok(torch.empty(1, 8, 8, 128, dtype=torch.bfloat16),
                              torch.empty(1, 8, 8, 128, dtype=torch.bfloat16),
                              kvcache._attn_params(128 ** -0.5, -1, -1, 0.0), None, 128, 4):
        pytest.skip("the compiled decode kernel does not take this CPU's bf16")
    sys.path.insert(0, os.path.join(ROOT, "bench", "cpu"))
    try:
        import s56_decode_layers_probe as probe
    finally:
        sys.path.pop(0)
    import flashtriton
    with flashtriton.use_backend("cpu"), kvcache.value_checks(False):
        ref = probe.api()
        for name in ("fwd", "compiled", "lean2"):
            assert torch.equal(getattr(probe, name)(), ref), name
        assert torch.equal(probe.lean(), ref)
