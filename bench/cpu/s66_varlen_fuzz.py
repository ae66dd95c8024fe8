"""Random flash_attn_varlen_func cases (session 66) under the tests' criterion, through tests/helpers.check_attention
(out, lse, dq / dk / dv and S_dmask's probabilities against float64; with dropout against the backend's own keep
mask): packed batches of 1-4 sequences of 0-150 queries / 0-200 keys (zero-length ones included), random dtype and
head dim, GQA, causal, windows, softcap, ALiBi ((H,) or (B, H)), dropout, softmax scales None / 0.3 / -0.2,
deterministic. Prints each failure (the case and the assertion) and a count.
DENSE=1 (session 76): flash_attn_func on (B, N, H, D) batches instead, B 1-2, the same features and criterion.
GLUON=1 (session 76, with DENSE=1 LENS=big): only what the dense Gluon kernels take (D 64 / 128 / 256, no ALiBi or
softcap; lengths from 300).
ROUTES=1 (session 76): count, over the cases, which set of routed launchers each case reached (launchers/forward.py
and backward.py's Gluon and warp-specialized branches; "other" for the rest), printed at the end.
DRY=N (session 76): print the first N cases a seed draws (the same stream) and run none: what a logged run covered.

    [ONE_KEY=0] [LENS=big] [DENSE=1 [GLUON=1]] [ROUTES=1] [DRY=N] PYTHONPATH=src \
        python bench/cpu/s66_varlen_fuzz.py SEED SECONDS [cpu|triton] [bf16|fp16|fp32|any]

(triton without a GPU: the kernels under `TRITON_INTERPRET=1` on CPU tensors.)"""
import collections
import os
import random
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))
import torch  # noqa: E402

from helpers import check_attention, rand_qkv, rand_varlen  # noqa: E402

ONE_KEY = os.environ.get("ONE_KEY", "1") == "1"   # ONE_KEY=0: draw no case where a row sees exactly one key


def one_key_rows(lens_q, lens_k, causal, ws):
    """Whether some row of the batch sees exactly one key (bottom-right aligned band, as the API's): the known
    limit (README: PyTorch's error 0 there, FlashAttention-2's delta = rowsum(dO * O) not)."""
    left, right = ws[0], 0 if causal else ws[1]
    for nq, nk in zip(lens_q, lens_k):
        for i in range(nq):
            p = i + nk - nq
            lo = 0 if left < 0 else max(0, p - left)
            hi = nk if right < 0 else min(nk, p + right + 1)
            if hi - lo == 1:
                return True
    return False


# LENS=big (GPU): sequences long enough for the Gluon VARLEN routes (launchers/policy) besides the short ones
BIG = os.environ.get("LENS") == "big"
LENS_Q = [0, 1, 17, 300, 700, 1500] if BIG else [0, 1, 2, 17, 64, 113, 150]
LENS_K = [0, 17, 300, 700, 1500, 2100] if BIG else [0, 1, 17, 64, 113, 200]
# DENSE=1 (session 76): one length a batch, never 0; with LENS=big around the dense Gluon routes' thresholds
# (launchers/policy: 512 / 1024 / 2048 / 4096), ragged (not multiples of 128) as well as aligned
DENSE = os.environ.get("DENSE") == "1"
DRY = int(os.environ.get("DRY", "0"))
if DENSE:
    LENS_Q = [1, 17, 300, 511, 700, 1024, 1500, 2048, 2100, 4096] if BIG else [1, 2, 17, 64, 113, 150]
    LENS_K = [17, 300, 512, 700, 1024, 1500, 2048, 2100, 4096, 4200] if BIG else [1, 17, 64, 113, 200]
GLUON = DENSE and BIG and os.environ.get("GLUON") == "1"
if GLUON:
    LENS_Q = [300, 511, 700, 1024, 1500, 2048, 2100, 4096]
    LENS_K = [512, 700, 1024, 1500, 2048, 2100, 4096, 4200]

seed, dur = int(sys.argv[1]), float(sys.argv[2])
backend = sys.argv[3] if len(sys.argv) > 3 else "cpu"
only = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] != "any" else None
dev = "cuda" if backend == "triton" and torch.cuda.is_available() else "cpu"
if backend == "triton" and dev == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
    # (session 67: without it every case was a rejected input, and the count read "0 failures")
    sys.exit("triton without a GPU needs TRITON_INTERPRET=1 in the environment (set before triton is imported)")
case_routes, route_sets = set(), collections.Counter()
if os.environ.get("ROUTES") == "1":
    from flashtriton.launchers import backward, backward_gluon, backward_gluon_d256  # noqa: E402
    from flashtriton.launchers import backward_gluon_varlen, forward, forward_gluon  # noqa: E402

    def _count(module, name, label):
        inner = getattr(module, name)

        def counted(*args, **kwargs):
            case_routes.add(label)
            return inner(*args, **kwargs)
        setattr(module, name, counted)
    for _m, _n, _l in ((forward_gluon, "fwd_into", "fwd_gluon"), (forward_gluon, "fwd_varlen", "fwd_gluon_varlen"),
                       (forward, "_fwd_warp_spec", "fwd_ws"),
                       (forward, "_fwd_warp_spec_varlen", "fwd_ws_varlen"), (backward_gluon, "fused_into", "bwd_fused"),
                       (backward_gluon_d256, "bwd_into", "bwd_d256"), (backward, "_bwd_warp_spec", "bwd_ws"),
                       (backward_gluon_varlen, "fused_varlen_into", "bwd_fused_varlen"),
                       (backward, "_bwd_warp_spec_varlen", "bwd_ws_varlen")):
        _count(_m, _n, _l)
rng = random.Random(seed)
torch.manual_seed(seed)
n = fails = rejected = 0
t_end = time.time() + (1e9 if DRY else dur)
while time.time() < t_end:
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[only] if only else \
        rng.choice([torch.bfloat16, torch.float16, torch.float32])
    d = rng.choice([64, 128, 256] if GLUON else [32, 40, 64, 80, 96, 128, 192, 256])
    hk = rng.choice([1, 2]); g = rng.choice([1, 2, 4]); h = hk * g
    nseq = rng.choice([1, 2]) if DENSE else rng.choice([1, 2, 3, 4])
    lens_q = [rng.choice(LENS_Q)] * nseq if DENSE else [rng.choice(LENS_Q) for _ in range(nseq)]
    lens_k = [rng.choice(LENS_K)] * nseq if DENSE else [rng.choice(LENS_K) for _ in range(nseq)]
    if sum(lens_q) == 0 or sum(lens_k) == 0:
        continue
    causal = rng.random() < 0.4
    ws = (rng.choice([-1, 0, 5, 40]), rng.choice([-1, 0, 3, 50])) if rng.random() < 0.3 else (-1, -1)
    softcap = rng.choice([0.0, 0.0, 5.0])
    alibi = None
    if rng.random() < 0.2:
        alibi = torch.rand(h) * 0.5 if rng.random() < 0.5 else torch.rand(nseq, h) * 0.5
    if GLUON:
        softcap, alibi = 0.0, None
    dropout = rng.choice([0.0, 0.0, 0.0, 0.17])
    scale = rng.choice([None, None, 0.3, -0.2])
    det = rng.random() < 0.2
    if not ONE_KEY and one_key_rows(lens_q, lens_k, causal, ws):
        continue
    case = dict(dtype=str(dtype)[6:], d=d, hk=hk, g=g, lens_q=lens_q, lens_k=lens_k, causal=causal, ws=ws,
                softcap=softcap, alibi=None if alibi is None else tuple(alibi.shape), dropout=dropout, scale=scale,
                det=det)
    n += 1
    if DRY:
        print(n, case, rng.randrange(1 << 30))
        if n >= DRY:
            break
        continue
    case_routes.clear()
    try:
        if DENSE:
            (q, k, v), varlen = rand_qkv(nseq, lens_q[0], lens_k[0], h, hk, d, dtype, dev), None
        else:
            (q, k, v), varlen = rand_varlen(lens_q, lens_k, h, hk, d, dtype, dev)
        check_attention(backend, q, k, v, varlen=varlen, causal=causal, window_size=ws, softcap=softcap,
                        alibi_slopes=None if alibi is None else alibi.to(dev), dropout_p=dropout,
                        softmax_scale=scale, seed=rng.randrange(1 << 30), deterministic=det)
    except (ValueError, NotImplementedError, TypeError):
        rejected += 1
    except AssertionError as e:
        fails += 1
        print("FAIL", case, str(e).splitlines()[0][:200], flush=True)
    except Exception as ex:  # noqa: BLE001 - a crash is a finding too
        fails += 1
        print("EXC", case, repr(ex)[:200], flush=True)
        traceback.print_exc(limit=6)
    route_sets[" + ".join(sorted(case_routes)) or "other"] += 1
for routes, count in route_sets.most_common():
    print(f"routes {routes}: {count} cases")
print(f"seed {seed}: {n} cases, {fails} failures, {rejected} rejected inputs")
