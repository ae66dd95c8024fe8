"""bf16 softcap in the compiled CPU forward (session 63): the float32 tanh step (default build) against the
double-precision one it replaced (the FT_SOFTCAP_F64 build) and the plain call, at the bench's prefill shape
(B = 1, H = 8, N = 4096, D = 128, softcap 30), non-causal and causal. Rounds run every variant in turn (order
reversed every other round); medians in ms. Also the largest output difference between the two softcap builds.

    PYTHONPATH=src python bench/cpu/s63_softcap_tanh_ab.py [ROUNDS] [OUT.json] [N]
"""
import sys

import torch
from abba import abba, median, save

import flashtriton
from flashtriton import flash_attn_func
from flashtriton.cpu import config, forward, native_prefill

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
n = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
torch.manual_seed(0)
q, k, v = (torch.randn(1, n, 8, 128, dtype=torch.bfloat16) for _ in range(3))
config.FWD_PATH = "compiled"
config.FWD_AMX = "off"
libs = {"f32 tanh": native_prefill.load(), "f64 tanh": native_prefill.load_variant("FT_SOFTCAP_F64")}
rows = []
for causal in (False, True):
    out = {}

    def call(name):
        lib, cap = (libs["f32 tanh"], 0.0) if name == "plain" else (libs[name], 30.0)
        native_prefill._library.lib = lib
        with flashtriton.use_backend("cpu"):
            out[name] = flash_attn_func(q, k, v, causal=causal, softcap=cap)
        assert forward.LAST_PATH == "compiled", forward.LAST_PATH

    ts = abba({name: (lambda name=name: call(name)) for name in ("plain", "f32 tanh", "f64 tanh")}, rounds)
    diff = dict(out_max=float((out["f32 tanh"].float() - out["f64 tanh"].float()).abs().max()))
    for name, t in ts.items():
        rows.append(dict(causal=causal, variant=name, ms=round(median(t) * 1e3, 1), **diff))
    print(f"done causal={causal} {diff}", file=sys.stderr)
native_prefill._library.lib = libs["f32 tanh"]
print(f"| causal | variant | ms (median of {rounds}) | f32 - f64 tanh: max out |\n|---|---|---|---|")
for r in rows:
    print(f"| {r['causal']} | {r['variant']} | {r['ms']} | {r['out_max']:.3g} |")
if len(sys.argv) > 2:
    save(sys.argv[2], rounds, rows, shape=[1, n, 8, 128])
