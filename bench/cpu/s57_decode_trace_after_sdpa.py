"""Session 57: where the compiled decode's fixed costs sit in the bench's context. The FT_TRACE build of the kernel
(native.load_variant("FT_TRACE")), called as s56_decode_layers_probe.py's lean2 (ft_decode, every constant prepared)
right after an SDPA call (or after a 20 ms sleep: "sleep"), bf16 8k, 8 items on 2 threads; per call, microseconds
from just before the ctypes call: the call's return, each thread's parallel-region entry and first item start, the
item loop's barrier. Medians last: [call, C entry, thr0 in, thr0 first item, thr1 in, thr1 first item, barrier].

    PYTHONPATH=src python bench/cpu/s57_decode_trace_after_sdpa.py 15 [sleep]
"""
import ctypes, math, statistics, sys, time, torch, torch.nn.functional as F
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from flashtriton.cpu import native, decode
from s54_lean_call_bound import L, q, kc, vc, ks, qs, es, consts, work, lsep, sdpa
lib = native.load_variant("FT_TRACE")
tr = (ctypes.c_uint64 * 512).in_dll(lib, "ft_trace")
lib.ft_rdtsc.restype = ctypes.c_uint64
c0 = lib.ft_rdtsc(); t0 = time.perf_counter(); time.sleep(0.05); ghz = (lib.ft_rdtsc() - c0) / (time.perf_counter() - t0) / 1e9
meta0 = (ctypes.c_int64 * 6)(0, 0, 0, L, 0, L)
rows = []
for r in range(int(sys.argv[1]) if len(sys.argv) > 1 else 15):
    if len(sys.argv) > 2 and sys.argv[2] == "sleep": time.sleep(0.02)
    else: sdpa()
    out = torch.empty_like(q)
    ctypes.memset(tr, 0, 512 * 8)
    e = lib.ft_rdtsc()
    lib.ft_decode(kc.data_ptr(), vc.data_ptr(), ks[0] * es, ks[1] * es, ks[2] * es, 0, None, 0, meta0, q.data_ptr(),
                  qs[0] * es, qs[1] * es, qs[2] * es, consts["scale"], 1, 8, 1, 4, 4, 128, 8, 1, work, out.data_ptr(),
                  1 * 32 * 128 * es, 32 * 128 * es, 128 * es, lsep, 2, 0)
    x = lib.ft_rdtsc()
    us = lambda c: (c - e) / ghz / 1e3
    t = [tr[8 + 64 * i: 8 + 64 * i + 64] for i in range(2)]
    rows.append((us(x), us(tr[0]) if tr[0] else 0, us(t[0][0]), us(t[0][4]), us(t[1][0]), us(t[1][4]), us(t[0][1])))
    print("call %5.0f | thr0 in %4.0f first item %4.0f | thr1 in %4.0f first item %4.0f | barrier %5.0f" % ((rows[-1][0],) + rows[-1][2:]))
print("medians:", [round(statistics.median(c), 1) for c in zip(*rows)], "tsc GHz %.2f" % ghz)
