"""Session 14: why did capturing the backward of causal D = 64 at N = 8k (B 2, H 32) fail in
s14_resume_rows_ab.py ("operation failed due to a previous error during capture")? Each case
in a fresh process: eager forward+backward, then the capture with every warning printed and
the first exception's full traceback."""
import sys
import traceback
import warnings

import torch

import flashtriton
from flashtriton.bench.common import capture_graph

b, n, h, d = (int(x) for x in sys.argv[1:5])
warnings.simplefilter("always")
q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
dout = torch.randn_like(q)


def both():
    return torch.autograd.grad(flashtriton.flash_attn_func(q, k, v, causal=True), (q, k, v), dout)


def fwd():
    with torch.no_grad():
        return flashtriton.flash_attn_func(q, k, v, causal=True)


both()
torch.cuda.synchronize()
for name, fn in (("fwd", fwd), ("fwd+bwd", both)):
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            capture_graph(fn)
        print(f"B={b} N={n} H={h} D={d} {name}: captured", flush=True)
        for w in caught:
            print("   warning:", str(w.message)[:300], flush=True)
    except Exception:
        print(f"B={b} N={n} H={h} D={d} {name}: FAILED", flush=True)
        for w in caught:
            print("   warning:", str(w.message)[:300], flush=True)
        traceback.print_exc()
        sys.exit(1)
