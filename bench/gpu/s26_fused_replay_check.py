"""Session 26 (prepared in session 25, never run): the fused Gluon backward replayed by
launch plans (launchers/backward_gluon.FUSED_REPLAYABLE, off by default until this passes).

For each case: plans on, FUSED_REPLAYABLE on; three forward+backward calls with fresh
inputs (the first records, the next two replay: plans.stats says so); each call's
gradients against the same inputs' gradients with plans off (fresh launches): dk / dv
bitwise, dq within 1e-2 of max |dq| (fp32 summation order), and dq against float32 SDPA
math. Then the eager backward time (do_bench, autograd.grad with retain_graph) with
FUSED_REPLAYABLE off and on: the host path a replay removes.

Prediction (session 25): replays right (the plan's slots checked on CPU,
tests/test_bwd_gluon.py::test_fused_launches_replayable); eager backward at D = 128
causal 1k, B = 16, H = 16 from ~0.78 ms (the grid's 220 TFLOP/s) toward the kernel's
~0.55 ms (310 TFLOP/s kernel-only), i.e. the host path (~150-250 us) hidden behind the
previous launches.

    PYTHONPATH=src python bench/gpu/s26_fused_replay_check.py
"""
import os

import torch
import torch.nn.functional as F

os.environ["FLASHTRITON_PLANS"] = "1"
from flashtriton import flash_attn_func  # noqa: E402
from flashtriton.bench.common import time_ms  # noqa: E402
from flashtriton.launchers import backward_gluon, plans  # noqa: E402


def grads(q, k, v, dout, causal):
    qg, kg, vg = (t.detach().requires_grad_(True) for t in (q, k, v))
    out = flash_attn_func(qg, kg, vg, causal=causal)
    return torch.autograd.grad(out, (qg, kg, vg), dout)


def sdpa_dq(q, k, v, dout, causal):
    qg, kg, vg = (t.detach().float().transpose(1, 2).requires_grad_(True) for t in (q, k, v))
    rep = qg.shape[1] // kg.shape[1]
    out = F.scaled_dot_product_attention(qg, kg.repeat_interleave(rep, 1), vg.repeat_interleave(rep, 1),
                                         is_causal=causal)
    return torch.autograd.grad(out, (qg,), dout.float().transpose(1, 2))[0].transpose(1, 2)


def case(name, b, n, h, hk, causal):
    backward_gluon.FUSED_REPLAYABLE = True
    plans.clear()
    for call in range(3):
        torch.manual_seed(call)
        q, k, v = (torch.randn(b, n, hh, 128, device="cuda", dtype=torch.bfloat16) for hh in (h, hk, hk))
        dout = torch.randn_like(q)
        before = dict(plans.stats)
        got = grads(q, k, v, dout, causal)
        replayed = plans.stats["replayed"] - before["replayed"]
        os.environ["FLASHTRITON_PLANS"] = "0"
        fresh = grads(q, k, v, dout, causal)
        os.environ["FLASHTRITON_PLANS"] = "1"
        same = torch.equal(got[1], fresh[1]) and torch.equal(got[2], fresh[2])
        dq_diff = ((got[0].float() - fresh[0].float()).abs().max() / fresh[0].float().abs().max()).item()
        err = (got[0].float() - sdpa_dq(q, k, v, dout, causal)).abs().max().item()
        print(f"{name} call {call}: replayed {replayed} plans, dk / dv bitwise fresh: {same}, dq vs fresh "
              f"{dq_diff:.1e} (rel), dq vs fp32 SDPA {err:.1e}", flush=True)
    q, k, v = (torch.randn(b, n, hh, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for hh in (h, hk, hk))
    out = flash_attn_func(q, k, v, causal=causal)
    dout = torch.randn_like(out)
    res = []
    for on in (False, True):
        backward_gluon.FUSED_REPLAYABLE = on
        plans.clear()
        ms = time_ms(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), "cuda")
        res.append(f"replay {'on' if on else 'off'} {ms * 1e3:.0f} us")
    print(f"{name} eager backward: " + ", ".join(res), flush=True)


case("causal 1k B=16 H=16", 16, 1024, 16, 16, True)
case("plain 4k B=2 H=16/4", 2, 4096, 16, 4, False)
case("causal 2k B=8 H=16", 8, 2048, 16, 16, True)
