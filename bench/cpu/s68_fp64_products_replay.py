"""Session 68, a lead ruled out: do float64 score products in the CPU's fp32 torch-ops forward cut the fp32 varlen
sweep's failures? Replays the failing cases of a bench/cpu/s66_varlen_fuzz.py log (those with dropout, where the
torch-ops forward runs; DROP=0: the others) three draws each through tests/helpers.check_attention, with the forward
module's engine.mm_nt as it is (base) or in float64 for blocks of at most N rows (N; a large N: every block).
Usage (repo root): PYTHONPATH=src python bench/cpu/s68_fp64_products_replay.py LOG base|N"""
import ast
import os
import sys
import types

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))
from helpers import check_attention, rand_varlen  # noqa: E402

from flashtriton.cpu import engine, forward  # noqa: E402

MODE = sys.argv[2]
if MODE != "base":
    limit = int(MODE)
    real = engine.mm_nt

    def mm_nt_f64(x, w):
        if x.dtype == torch.float32 and x.shape[0] <= limit:
            return torch.mm(x.double(), w.double().t()).float()
        return real(x, w)
    proxy = types.SimpleNamespace(**{k: getattr(engine, k) for k in dir(engine) if not k.startswith("__")})
    proxy.mm_nt = mm_nt_f64
    forward.engine = proxy
cases = []
for line in open(sys.argv[1]):
    if line.startswith("FAIL") and ("'dropout': 0.17" in line) == (os.environ.get("DROP", "1") == "1"):
        text = line[5:line.index("}") + 1]
        cases.append(ast.literal_eval(text.replace("(", "[").replace(")", "]")))
fails = runs = 0
for c in cases:
    for s in range(3):
        torch.manual_seed(1000 + s)
        (q, k, v), varlen = rand_varlen(c["lens_q"], c["lens_k"], c["hk"] * c["g"], c["hk"], c["d"], torch.float32,
                                        "cpu")
        alibi = None if c["alibi"] is None else torch.rand(*c["alibi"]) * 0.5
        runs += 1
        try:
            check_attention("cpu", q, k, v, varlen=varlen, causal=c["causal"], window_size=tuple(c["ws"]),
                            softcap=c["softcap"], alibi_slopes=alibi, dropout_p=c["dropout"],
                            softmax_scale=c["scale"], seed=s, deterministic=c["det"])
        except AssertionError:
            fails += 1
print(f"{MODE}: {len(cases)} cases x 3 draws: {runs} runs, {fails} failures")
