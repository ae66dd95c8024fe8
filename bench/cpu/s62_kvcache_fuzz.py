"""Random flash_attn_with_kvcache cases (session 62) under the tests' criterion (tests/test_kvcache.run_case: out and
lse within 2x plain PyTorch's same-dtype error of the float64 truth, appended cache rows within one ulp, every
other cache entry bitwise). Random dtype, head dim 32-256, MHA / GQA (groups 1-4), batch 1-3, 1-7 query rows,
capacity 1-600 keys with random lengths (0 included), appends of 0-3 tokens, paged caches (pages 16-256 keys),
cache_batch_idx, cache_leftpad, rotary (interleaved or not, partial), causal, windows, softcap, ALiBi (1- and
2-D), softmax scales None / 0.3 / -0.2, num_splits 0 / 1 / 3 / 8.

Each case runs as a decode loop of STEPS calls on the same tensors (the caches, cache_seqlens and the rest kept,
cache_seqlens advanced in place by the appended tokens, a fresh q and fresh new tokens each step), so the
structure / step memos of flashtriton.kvcache replay on later steps; every step is checked against the reference
on a copy of the caches taken just before it. A ValueError / NotImplementedError before the first step (an input
the API rejects) is counted, not failed. Prints each failure and a summary.

    PYTHONPATH=src [CASE=n] [DIMS=d,d,...] python bench/cpu/s62_kvcache_fuzz.py SEED SECONDS [cpu|triton] [STEPS]

CASE=n reruns case n of that seed alone (its tensors are seeded per case).

(triton on a CPU-only machine: set TRITON_INTERPRET=1; the interpreter is slow, so shapes are kept small.)
"""
import math
import os
import random
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))
import torch  # noqa: E402

import flashtriton  # noqa: E402

import test_kvcache as tk  # noqa: E402  (make_inputs, run_case: the tests' own inputs and checks)

seed = int(sys.argv[1])
dur = float(sys.argv[2])
backend = sys.argv[3] if len(sys.argv) > 3 else "cpu"
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 3
small = backend == "triton" and os.environ.get("TRITON_INTERPRET") == "1"
rng = random.Random(seed)
torch.manual_seed(seed)
# head dims drawn (DIMS="8,16,..." overrides; session 64, for the CPU decode's every-multiple-of-8 head dims: the
# default list keeps earlier seeds' case streams)
DIMS = ([int(x) for x in os.environ["DIMS"].split(",")] if os.environ.get("DIMS")
        else [32, 40, 64, 80, 96, 128, 192, 256])


def draw():
    dtype = rng.choice([torch.bfloat16, torch.float16, torch.float32])
    d = rng.choice([32, 64, 128] if small else DIMS)
    hk = rng.choice([1, 2, 4])
    g = rng.choice([1, 2, 3, 4])
    b = rng.choice([1, 2, 3])
    sq = rng.choice([1, 1, 1, 2, 4, 7])
    snew = rng.choice([0, 0, 1, 3])
    page = rng.choice([0, 0, 16, 32, 64, 128, 256])
    capacity = rng.randint(1, 200 if small else 600) + steps * snew
    if page:
        capacity = -(-capacity // page) * page
    lens = [rng.randint(0, capacity - steps * snew) for _ in range(b)]
    batch_cache = b + rng.randint(0, 2) if not page and rng.random() < 0.3 else None
    rot = 0
    if rng.random() < 0.3:
        rot = rng.choice([d, d // 2]) // 2 * 2
    leftpad = [rng.randint(0, n) for n in lens] if rng.random() < 0.2 else None
    causal = rng.random() < 0.4
    ws = (rng.choice([-1, 0, 5, 40]), rng.choice([-1, 0, 3, 50])) if rng.random() < 0.3 else (-1, -1)
    softcap = rng.choice([0.0, 0.0, 0.0, 5.0])
    alibi = None
    if rng.random() < 0.2:
        alibi = torch.rand(b, hk * g) * 0.5 if rng.random() < 0.5 else torch.rand(hk * g) * 0.5
    case = dict(dtype=dtype, d=d, hk=hk, g=g, b=b, sq=sq, snew=snew, page=page, capacity=capacity, lens=lens,
                batch_cache=batch_cache, rot=rot, interleaved=rng.random() < 0.5, leftpad=leftpad, causal=causal,
                ws=ws, softcap=softcap, alibi=None if alibi is None else tuple(alibi.shape),
                scale=rng.choice([None, None, 0.3, -0.2]), splits=rng.choice([0, 0, 1, 3, 8]))
    return case, alibi


def run(case, alibi):
    inp = tk.make_inputs(case["b"], case["sq"], case["hk"] * case["g"], case["hk"], case["d"], case["dtype"],
                         case["capacity"], case["lens"], snew=case["snew"], page_size=case["page"],
                         batch_cache=case["batch_cache"], rotary_dim=case["rot"], leftpad=case["leftpad"])
    if case["page"]:   # make_inputs marks the blocks past lens + snew unused; the loop appends steps x snew
        used = [math.ceil((n + steps * case["snew"]) / case["page"]) for n in case["lens"]]
        table = inp["block_table"]
        free = sorted(set(range(inp["k_cache"].shape[0])) - set(table[table >= 0].tolist()))
        for bi, u in enumerate(used):
            for j in range(u):
                if int(table[bi, j]) < 0:
                    table[bi, j] = free.pop()
    alibi = None if alibi is None else alibi.to(tk.DEVICE)
    kw = dict(causal=case["causal"], window_size=case["ws"], softcap=case["softcap"], alibi_slopes=alibi,
              num_splits=case["splits"], rotary_interleaved=case["interleaved"], softmax_scale=case["scale"])
    params = tk.params_for(inp, case["causal"], case["ws"], case["softcap"], case["scale"])
    for step in range(steps):
        if step:
            inp["q"] = torch.randn_like(inp["q"])
            if case["snew"]:
                inp["k"], inp["v"] = torch.randn_like(inp["k"]), torch.randn_like(inp["v"])
        truth = tk._ref(inp, params, case["interleaved"], alibi, torch.float64)
        lowp = tk._ref(inp, params, case["interleaved"], alibi, case["dtype"])
        written = tk.written_mask(inp)
        k0, v0 = inp["k_cache"].clone(), inp["v_cache"].clone()
        call = {k: v for k, v in inp.items() if k != "q"}
        with flashtriton.use_backend(backend):   # on the loop's own tensors: the caches change in place
            out, lse = flashtriton.flash_attn_with_kvcache(inp["q"], return_softmax_lse=True, **kw, **call)
        tk.assert_close(f"out (step {step})", out, truth[0], lowp[0], 2, case["dtype"])
        tk.assert_close(f"lse (step {step})", lse, truth[1], lowp[1], 2, case["dtype"])
        tk.assert_cache(f"k_cache (step {step})", inp["k_cache"], truth[2], k0, written)
        tk.assert_cache(f"v_cache (step {step})", inp["v_cache"], truth[3], v0, written)
        inp["cache_seqlens"] += case["snew"]


def path():
    if backend != "cpu":
        return backend
    from flashtriton.cpu import decode as cpu_decode
    return cpu_decode.LAST_PATH


only = int(os.environ.get("CASE", "0"))   # CASE=n: draw cases 1 .. n, run only case n (a failure's repro)
n = fails = rejected = 0
t_end = time.time() + dur
reasons = {}
while time.time() < t_end or only:
    n += 1
    # each case's tensors reproducible alone; seeded before draw() since session 64: its ALiBi slopes came from the
    # previous case's torch RNG state, which CASE=n (skipping the earlier cases) did not reproduce
    torch.manual_seed(seed * 1000003 + n)
    case, alibi = draw()
    if only and n < only:
        continue
    try:
        run(case, alibi)
    except (ValueError, NotImplementedError) as e:
        rejected += 1
        key = str(e)[:90]
        if key not in reasons:
            reasons[key] = case
            print("rejected:", key, "|", {k: v for k, v in case.items() if k != "lens"}, flush=True)
    except Exception:  # noqa: BLE001 - every other failure is a finding
        fails += 1
        print(f"FAIL case {n} ({path()})", case, flush=True)
        traceback.print_exc(limit=3)
    if only:
        break
print(f"seed {seed} backend {backend}: {n} cases x {steps} steps, {fails} failures, {rejected} rejected")
