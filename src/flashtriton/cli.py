"""python -m flashtriton {info, check, bench}: the main job.

  info    versions, device and backends
  check   correctness against the float64 reference on the default device
  bench   the benchmark: on a GPU the prefill grid (and decode), else the CPU suite
"""
from __future__ import annotations

import argparse
import math
import sys
import time

import torch


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def cmd_info(_args) -> int:
    import triton

    import flashtriton
    from flashtriton import backends
    dev = _device()
    print(f"flashtriton {flashtriton.__version__}")
    print(f"torch {torch.__version__}, triton {triton.__version__}, python {sys.version.split()[0]}")
    if dev == "cuda":
        p = torch.cuda.get_device_properties(0)
        print(f"device: {p.name}, sm_{p.major}{p.minor}, {p.multi_processor_count} SMs, "
              f"{p.total_memory / 2**30:.0f} GiB")
    else:
        print(f"device: CPU, {torch.get_num_threads()} threads")
    print(f"default backend for {dev} tensors: {backends.default_for(torch.device(dev))}")
    print(f"backends: triton (CUDA{', interpreter' if triton.knobs.runtime.interpret else ''}), "
          f"cpu ({'available' if backends.cpu_available() else 'not built'}), reference")
    return 0


def _check_case(device, backend, b, nq, nk, h, hk, d, causal, dtype):
    from flashtriton import flash_attn_func, reference, use_backend
    from flashtriton.bench.common import max_rel_err
    q, k, v = (torch.randn(b, n, hh, d, dtype=dtype, device=device, requires_grad=True)
               for n, hh in ((nq, h), (nk, hk), (nk, hk)))
    dout = torch.randn_like(q)
    with use_backend(backend):
        out = flash_attn_func(q, k, v, causal=causal)
        grads = torch.autograd.grad(out, (q, k, v), dout)
    kw = dict(softmax_scale=1 / math.sqrt(d), window_right=0 if causal else -1)
    args64 = [t.detach().double() for t in (q, k, v)]
    ref = reference.attention(*args64, **kw)[0]
    ref_grads = reference.attention_grad(dout.double(), *args64, **kw)
    errs = [max_rel_err(out, ref)] + [max_rel_err(g, r) for g, r in zip(grads, ref_grads)]
    return errs


def cmd_check(_args) -> int:
    from flashtriton import backends
    dev = _device()
    backend = backends.select(torch.device(dev))
    cases = [(2, 128, 128, 4, 4, 64, False), (2, 113, 203, 4, 2, 40, True), (1, 256, 256, 8, 1, 128, True),
             (1, 17, 17, 2, 2, 96, False), (1, 1, 300, 4, 2, 128, True)]
    limit = 2e-2
    print(f"checking backend '{backend}' on {dev} against the float64 reference (relative error, limit {limit})")
    print("| B | Nq | Nk | H | Hk | D | causal | dtype | out | dq | dk | dv | |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ok = True
    t0 = time.perf_counter()
    for dtype in (torch.float16, torch.bfloat16):
        for case in cases:
            errs = _check_case(dev, backend, *case, dtype)
            good = all(e <= limit for e in errs)
            ok &= good
            print("| " + " | ".join(str(x) for x in case) + f" | {str(dtype)[6:]} | "
                  + " | ".join(f"{e:.1e}" for e in errs) + f" | {'ok' if good else 'FAIL'} |")
    print(f"{'all passed' if ok else 'FAILURES'} in {time.perf_counter() - t0:.1f}s")
    return 0 if ok else 1


def cmd_bench(args) -> int:
    if _device() == "cuda":
        if args.suite in ("prefill", "all"):
            from flashtriton.bench import prefill
            rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
            prefill.main(rest, out_dir=args.out)
        if args.suite in ("decode", "all"):
            from flashtriton.bench import decode
            decode.main(out_dir=args.out)
        return 0
    from flashtriton.bench import cpu
    cpu.main(out_dir=args.out)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m flashtriton", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("info", help="versions, device, backends").set_defaults(fn=cmd_info)
    sub.add_parser("check", help="correctness on the default device").set_defaults(fn=cmd_check)
    b = sub.add_parser("bench", help="benchmark on the default device")
    b.add_argument("--suite", choices=["prefill", "decode", "all"], default="all", help="GPU only")
    b.add_argument("--out", default=None, help="results root (default: ./bench/results)")
    b.add_argument("rest", nargs=argparse.REMAINDER, help="options passed to the prefill benchmark")
    b.set_defaults(fn=cmd_bench)
    args = ap.parse_args(argv)
    return args.fn(args)
