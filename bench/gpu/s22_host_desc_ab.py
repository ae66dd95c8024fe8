"""Session 22: the forward's host-made descriptors for short eager calls too
(launchers.common.host_desc_default, "fwd": always; until now eager forwards under 1e11
FLOPs made their descriptors in the kernel, for the ~45 us of host time the host-made
ones cost before launch plans existed).

Call 1 (s22_short_fwd_ab.py) found fwd.py's short eager calls at 1.4-1.8x their CUDA-graph
replay (D = 64 causal 512: 259 against 147 us) with only ~80 us of host time a call: the
graph capture takes host descriptors (fwd_host_desc_pays), the eager call does not.
Prediction: eager within ~5% of graph for fwd.py's short calls (D = 64 causal 512 / 1k
TFLOP/s 134 / 209 -> ~230 / ~300, D = 256 causal 512 185 -> ~235), host time a call +0-5
us (a replay encodes each descriptor once per base address: plans._DirectLaunch).
Also D = 256 causal 512 (policy.FWD_SHORT_ON_FWD_PY keeps it on fwd.py: 242 against
fwd_ws.py's 217 one tile a program, session 13) against the persistent fwd_ws.py.
"""
import torch
from triton.testing import do_bench

import flashtriton
from flashtriton.bench.common import graph_time_ms, host_us
from flashtriton.launchers import common, plans, policy
from fwd_ab import alternate_outputs  # bench/gpu, the script's folder

NEW = common.host_desc_default
SHORT = dict(policy.FWD_SHORT_ON_FWD_PY)


def variant(host_desc_fwd_eager: bool, short=True):
    def apply():
        plans.clear()
        policy.FWD_SHORT_ON_FWD_PY.clear()
        if short:
            policy.FWD_SHORT_ON_FWD_PY.update(SHORT)
        if host_desc_fwd_eager:
            common.host_desc_default = NEW
        else:
            # the old rule for these shapes (all under 1e11 FLOPs): in-kernel eagerly,
            # host-made under capture
            def rule(kernel, block_d, causal, seqlen):
                if kernel != "fwd":
                    return NEW(kernel, block_d, causal, seqlen)
                return torch.cuda.is_current_stream_capturing()
            common.host_desc_default = rule
    return apply


def case(d, n, causal, variants, grad=True):
    b, h = 16384 // n, 2048 // d
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=grad) for _ in range(3))
    fl = 4 * b * h * n * n * d / (2 if causal else 1)
    f = lambda: flashtriton.flash_attn_func(q, k, v, causal=causal)        # noqa: E731
    def measure():
        e = do_bench(f, warmup=25, rep=100, return_mode="median")
        with torch.no_grad():
            g = graph_time_ms(f)
        return fl / e / 1e9, fl / g / 1e9, host_us(f, calls=100, reps=2)
    res, outs = alternate_outputs(variants, f, measure)
    names = list(variants)
    same = {nm: torch.equal(outs[nm], outs[names[0]]) for nm in names[1:]}
    label = f"D={d} N={n} {'causal' if causal else 'plain'}"
    print(f"{label:22s} " + "  ".join(f"{nm}: " + " / ".join(f"{e:4.0f}e {g:4.0f}g {hu:3.0f}us" for e, g, hu in r)
                                      for nm, r in res.items()) + f"  equal to first: {same}", flush=True)


def main():
    print("TFLOP/s eager (e), graph (g), host us a call; two rounds", flush=True)
    two = {"in-kernel (old)": variant(False), "host (new)": variant(True)}
    for d, n in [(64, 512), (64, 1024), (64, 2048), (256, 512), (128, 256)]:
        case(d, n, True, two)
    case(256, 512, True, {"fwd.py host": variant(True), "fwd_ws pers": variant(True, short=False)})
    common.host_desc_default = NEW
    policy.FWD_SHORT_ON_FWD_PY.update(SHORT)


if __name__ == "__main__":
    main()
