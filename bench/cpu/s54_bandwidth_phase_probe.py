"""Probe (session 54): the 2-vCPU Zen 4 VM's read bandwidth has two modes (~36 and ~60 GB/s for a torch sum over
512 MiB, switching over tens of seconds); does the bf16 8k decode follow them? Loop for `dur` seconds: SDPA (as the
bench), our decode, the 512 MiB sum; writes every (time, SDPA ms, decode us, sum GB/s) to `out` (JSON) and prints
medians. Session 54's 240 s run: the sum read ~60 GB/s in 9 of 12 20-second windows and ~37 in 3, the decode
1140-1317 us in both (not faster in the fast mode).

    PYTHONPATH=src python bench/cpu/s54_bandwidth_phase_probe.py 240 /tmp/probe.json
"""
import json, sys, time, math
import torch, torch.nn.functional as F
import flashtriton
from flashtriton import kvcache
dur = float(sys.argv[1]); out = sys.argv[2]
torch.manual_seed(0)
hq, hk, d, L = 32, 8, 128, 8192
q = torch.randn(1, 1, hq, d, dtype=torch.bfloat16)
kc = torch.randn(1, L, hk, d, dtype=torch.bfloat16); vc = torch.randn_like(kc)
lens = torch.full((1,), L, dtype=torch.int32)
x = torch.rand(512 * 2**20 // 4)
x.sum()
nbytes = 2 * L * hk * d * 2
rec = []
t_end = time.time() + dur
with flashtriton.use_backend("cpu"), kvcache.value_checks(False):
    flashtriton.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)
    while time.time() < t_end:
        t0 = time.perf_counter(); F.scaled_dot_product_attention(q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2), enable_gqa=True); t1 = time.perf_counter()
        flashtriton.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens); t2 = time.perf_counter()
        x.sum(); t3 = time.perf_counter()
        rec.append((time.time(), (t1 - t0) * 1e3, (t2 - t1) * 1e6, x.numel() * 4 / (t3 - t2) / 1e9))
json.dump(rec, open(out, "w"))
import statistics as st
dec = [r[2] for r in rec]; bw = [r[3] for r in rec]
print(len(rec), "decode us med/min/max", st.median(dec), min(dec), max(dec), "bw med/min/max", st.median(bw), min(bw), max(bw))
