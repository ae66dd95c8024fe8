"""Session 60: flash_attn_func / flash_attn_varlen_func with one query row (what Hugging Face's generation loop calls
each decode step) against flash_attn_with_kvcache on the same K / V: the prefill kernels give a one-row call B * H
programs, each streaming its head's whole K / V, where the decode kernel splits the keys over the SMs and reads each
KV byte once per GQA group. Session 60, call 4: "func" takes the decode kernel (policy.ONE_ROW_DECODE),
"func_prefill_route" the prefill route of before; call 5: "func" as routed (ONE_ROW_DECODE_MIN_NK), "decode_route" /
"prefill_route" either route forced. bf16, Hq = 32, Hk = 8, D = 128, B = 1 / 8, Nk = 1k-32k, causal (bottom-right:
the row sees every key). triton.testing.do_bench (L2 flushed before each call), median us; outputs compared.
Session 61: an optional dtype argument (bf16 / fp16 / fp32; bf16 by default; "decode_route" sets both thresholds,
ONE_ROW_DECODE_MIN_NK and _FP32, to 1) and key counts (comma-separated; 1k-32k by default).
Session 65: ROUNDS=n (env, default 1) times each row's calls in n rounds, each round in rotated order, and prints the
median of the rounds; a first unprinted do_bench warms the card (the H200's first row read 2-3x slow in session 65);
"kvcache_s1" is the decode kernel with num_splits=1 (one launch, no merge).
Usage: [ROUNDS=n] PYTHONPATH=src python bench/gpu/s60_one_row_route_probe.py [dtype [nk,nk,...]]"""
import os
import statistics
import sys

import torch
import triton

import flashtriton
from flashtriton import kvcache
from flashtriton.launchers import plans, policy

MIN_NK = policy.ONE_ROW_DECODE_MIN_NK
MIN_NK_FP32 = policy.ONE_ROW_DECODE_MIN_NK_FP32
NKS = [int(x) for x in sys.argv[2].split(",")] if len(sys.argv) > 2 else [1024, 2048, 4096, 8192, 32768]
ROUNDS = int(os.environ.get("ROUNDS", "1"))
DTYPE = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[sys.argv[1] if len(sys.argv) > 1 else "bf16"]


def main():
    with kvcache.value_checks(False):   # (their host sync would time the host: README "Decode")
        run()


def run():
    torch.manual_seed(0)
    plans.clear()
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, "ONE_ROW_DECODE_MIN_NK", MIN_NK, MIN_NK_FP32, DTYPE,
          flush=True)
    for b in (1, 8):
        for n in NKS:
            if b * n > 65536:
                continue
            q = torch.randn(b, 1, 32, 128, device="cuda", dtype=DTYPE)
            k = torch.randn(b, n, 8, 128, device="cuda", dtype=DTYPE)
            v = torch.randn_like(k)
            qv, kv, vv = q.reshape(b, 32, 128), k.reshape(b * n, 8, 128), v.reshape(b * n, 8, 128)
            cu_q = torch.arange(b + 1, device="cuda", dtype=torch.int32)
            cu_k = cu_q * n

            def route(decode: bool):
                def call():
                    policy.ONE_ROW_DECODE, policy.ONE_ROW_DECODE_MIN_NK = decode, 1
                    policy.ONE_ROW_DECODE_MIN_NK_FP32 = 1
                    try:
                        return flashtriton.flash_attn_func(q, k, v, causal=True)
                    finally:
                        policy.ONE_ROW_DECODE, policy.ONE_ROW_DECODE_MIN_NK = True, MIN_NK
                        policy.ONE_ROW_DECODE_MIN_NK_FP32 = MIN_NK_FP32
                return call

            calls = {
                "func": lambda: flashtriton.flash_attn_func(q, k, v, causal=True),
                "decode_route": route(True),
                "prefill_route": route(False),
                "varlen": lambda: flashtriton.flash_attn_varlen_func(qv, kv, vv, cu_q, cu_k, 1, n, causal=True),
                "kvcache": lambda: flashtriton.flash_attn_with_kvcache(q, k, v, causal=True),
            }
            if ROUNDS > 1:
                calls["kvcache_s1"] = lambda: flashtriton.flash_attn_with_kvcache(q, k, v, causal=True,
                                                                                  num_splits=1)
            ref = calls["kvcache"]().float()
            diffs = {name: (fn().float().reshape(ref.shape) - ref).abs().max().item() for name, fn in calls.items()}
            if b == 1 and n == NKS[0]:   # warm-up, not printed
                triton.testing.do_bench(calls["func"], warmup=100, rep=500)
            names, times = list(calls), {name: [] for name in calls}
            for r in range(ROUNDS):
                for name in names[r % len(names):] + names[:r % len(names)]:
                    us = triton.testing.do_bench(calls[name], warmup=25, rep=200, return_mode="median") * 1e3
                    times[name].append(us)
            res = {name: (statistics.median(times[name]), diffs[name]) for name in names}
            kv_bytes = 2 * b * n * 8 * 128 * k.element_size()
            print(f"B={b} Nk={n:5d}: " + "; ".join(
                f"{name} {us:8.1f} us ({kv_bytes / us / 1e3:6.0f} GB/s, max|d| {d:.1e})" for name, (us, d) in res.items())
                + f"; decode / prefill route {res['decode_route'][0] / res['prefill_route'][0]:.2f}x", flush=True)


if __name__ == "__main__":
    main()
