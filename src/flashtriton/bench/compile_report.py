"""Compile the prefill kernels for Hopper (sm_90a) without a GPU and read the result:
registers, spills, shared memory, and whether the SASS holds HGMMA (warpgroup MMA)
and UTMALDG (bulk tensor copies). Costs no device time; runs on any machine with
Triton installed (its bundled ptxas and cuobjdump do the work).

    python -m flashtriton.bench.compile_report --head-dims 64 128 256
"""
from __future__ import annotations

import argparse
import hashlib
import inspect
import os
import re
import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from flashtriton.kernels import configs
from flashtriton.kernels.bwd import attn_bwd_dkdv_kernel, attn_bwd_dq_kernel
from flashtriton.kernels.fwd import attn_fwd_kernel

KERNELS = {"fwd": attn_fwd_kernel, "dkdv": attn_bwd_dkdv_kernel, "dq": attn_bwd_dq_kernel}
_NVBIN = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
_PTR_TYPES = {"LSE": "*fp32", "DELTA": "*fp32", "CU_Q": "*i32", "CU_K": "*i32", "CU_BLOCKS": "*i32", "ORDER": "*i32",
              "ALIBI": "*fp32", "RNG": "*i64", "KEYS": "*i32"}
_FLOAT_ARGS = {"softmax_scale", "qk_scale", "softcap_scale", "softcap_out", "dropout_p"}


def compile_variant(kernel: str, tile: configs.Tile, head_dim: int, dtype: str = "bf16", maxnreg: int | None = None,
                    **flags):
    """maxnreg: Triton's option of that name (the launchers' common.reg_options), None for none."""
    fn = KERNELS[kernel]
    sig, const = signature(fn, tile, head_dim, dtype, **flags)
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in const.items()})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=tile.num_warps, num_stages=tile.num_stages,
                                       **({"maxnreg": maxnreg} if maxnreg else {})))


def signature(fn, tile: configs.Tile, head_dim: int, dtype: str = "bf16", **flags):
    """(signature, constexprs) of one compile of fn. Every constexpr the caller leaves out
    takes its default: before 2026-11-30 only USE_ORDER and HOST_DESC did, and the others
    (RESUME, KEY_ROWS, ...) were typed as pointers, so the reports compiled their branches
    as runtime code (bwd.py's dK/dV at D = 128: 200 spill bytes reported, 400 real)."""
    const = dict(HEAD_DIM=head_dim, BLOCK_D=max(16, triton.next_power_of_2(head_dim)),
                 BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, IS_VARLEN=False, HAS_LEFT=False,
                 HAS_RIGHT=False, HAS_ALIBI=False, HAS_SOFTCAP=False, HAS_DROPOUT=False, DOT_PRECISION="tf32")
    const.update(flags)
    for name, default in constexpr_defaults(fn).items():  # what the caller left out
        const.setdefault(name, default)
    if "FUSED_DELTA" in const and not const["FUSED_DELTA"]:
        const.setdefault("O", None)     # bwd.py's dQ kernel: launched with O = None (a constexpr) then
    bd = const["BLOCK_D"]
    # host-made descriptors (HOST_DESC): (B, N, H, D) with a [1, rows, 1, BLOCK_D] box
    desc_rows = {"Q_DESC": tile.block_m, "O_DESC": tile.block_m, "DO_DESC": tile.block_m, "DQ_DESC": tile.block_m,
                 "K_DESC": tile.block_n, "V_DESC": tile.block_n, "DK_DESC": tile.block_n, "DV_DESC": tile.block_n}
    sig = {}
    for name in inspect.signature(getattr(fn, "fn", fn)).parameters:
        if name in const:
            sig[name] = "constexpr"
        elif name in desc_rows and const.get("HOST_DESC"):
            sig[name] = f"tensordesc<{dtype}[1, {desc_rows[name]}, 1, {bd}]>"
        elif name[0].isupper():
            sig[name] = _PTR_TYPES.get(name, f"*{dtype}")
        elif name in _FLOAT_ARGS:
            sig[name] = "fp32"
        else:
            sig[name] = "i32"
    return sig, const


def constexpr_defaults(fn) -> dict:
    """name -> default of fn's constexpr parameters that have one (from the Python
    function itself, so that it also works on the interpreter's wrapper)."""
    params = inspect.signature(getattr(fn, "fn", fn)).parameters.values()
    return {p.name: p.default for p in params
            if "constexpr" in str(p.annotation) and p.default is not inspect.Parameter.empty}


def ptxas_log(compiled) -> str:
    """ptxas -v's report (stderr) for the compiled kernel's PTX, sm_90a."""
    with tempfile.TemporaryDirectory() as tmp:
        ptx = os.path.join(tmp, "k.ptx")
        with open(ptx, "w") as f:
            f.write(compiled.asm["ptx"])
        return subprocess.run([os.path.join(_NVBIN, "ptxas"), "-arch=sm_90a", "-v", ptx, "-o",
                               os.path.join(tmp, "k.cubin")], capture_output=True, text=True).stderr


def sass(compiled) -> str:
    """cuobjdump --dump-sass of the compiled kernel's cubin."""
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        with open(cubin, "wb") as f:
            f.write(compiled.asm["cubin"])
        return subprocess.run([os.path.join(_NVBIN, "cuobjdump"), "--dump-sass", cubin],
                              capture_output=True, text=True).stdout


def sass_digest(compiled) -> tuple[str, int]:
    """(sha256 prefix, instruction count) of the SASS instructions alone (the lines with an address), to tell
    whether a change left a kernel's instructions byte-identical."""
    lines = [line for line in sass(compiled).splitlines() if re.search(r"/\*[0-9a-f]{4,}\*/", line)]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16], len(lines)


def _compile_cache_kernel(fn, const: dict, dtype: str, i32_ptrs, data_ptrs, num_warps: int, num_stages: int,
                          maxnreg: int | None = None):
    """fn for sm_90a with constexprs const, the data_ptrs of dtype ("bf16", "fp16", "fp32"), int32 index tensors
    i32_ptrs, fp32 scalars and other pointers (workspaces, lse, slopes), int32 integers."""
    sig = {}
    for name in inspect.signature(fn.fn).parameters:
        if name in const:
            sig[name] = "constexpr"
        elif name in i32_ptrs:
            sig[name] = "*i32"
        elif name in data_ptrs:
            sig[name] = f"*{dtype}"
        elif name[0].isupper():
            sig[name] = "*fp32"
        elif name in ("qk_scale", "softcap_scale", "softcap_out"):
            sig[name] = "fp32"
        else:
            sig[name] = "i32"
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in const.items()})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=num_warps, num_stages=num_stages,
                                       **({"maxnreg": maxnreg} if maxnreg else {})))


def compile_decode(const: dict, dtype: str, num_warps: int, num_stages: int):
    """kernels/decode.py's split kernel, sm_90a, with constexprs const (every one the kernel lacks a default for) and
    q / caches / out of dtype ("bf16", "fp16", "fp32"); int32 index tensors, fp32 scalars and workspaces."""
    from flashtriton.kernels.decode import decode_split_kernel as fn
    return _compile_cache_kernel(fn, const, dtype, ("SEQLENS", "BATCH_IDX", "LEFTPAD", "BLOCK_TABLE", "COUNTERS"),
                                 ("Q", "K_CACHE", "V_CACHE", "K_DESC", "V_DESC", "K_NEW", "V_NEW", "O"),
                                 num_warps, num_stages)


def compile_paged(const: dict, dtype: str, num_warps: int, num_stages: int, maxnreg: int | None = None):
    """kernels/fwd_paged.py's kernel (pointer loads: KV_TMA False), sm_90a, as compile_decode."""
    from flashtriton.kernels.fwd_paged import attn_fwd_paged_kernel as fn
    return _compile_cache_kernel(fn, const, dtype, ("CU_Q", "CU_K", "CU_BLOCKS", "BLOCK_TABLE"),
                                 ("Q", "K_CACHE", "V_CACHE", "O", "K_DESC", "V_DESC"), num_warps, num_stages, maxnreg)


def frame(compiled) -> dict:
    """ptxas -v's registers, stack frame and spill stores / loads (bytes a thread); None where it printed none.
    The stack frame is what the driver reserves for every thread the card can hold (session 69)."""
    out = ptxas_log(compiled)
    regs = re.search(r"Used (\d+) registers", out)
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", out)
    stack, stores, loads = (int(g) for g in m.groups()) if m else (None, None, None)
    return dict(regs=int(regs.group(1)) if regs else None, stack=stack, spill_stores=stores, spill_loads=loads)


def resources(compiled) -> dict:
    """Registers and spills from ptxas -v; HGMMA/UTMALDG counts from the SASS."""
    f = frame(compiled)
    sass_text = sass(compiled)
    return dict(regs=f["regs"],
                spill_bytes=f["spill_stores"] + f["spill_loads"] if f["spill_stores"] is not None else None,
                smem=compiled.metadata.shared, hgmma=sass_text.count("HGMMA"), utmaldg=sass_text.count("UTMALDG"),
                hmma=sass_text.count("HMMA"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--head-dims", type=int, nargs="+", default=[64, 128, 256])
    ap.add_argument("--kernels", nargs="+", default=list(KERNELS))
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--host-desc", action="store_true", help="the HOST_DESC variants (host-made descriptors)")
    args = ap.parse_args(argv)
    print("| kernel | D | tile (BM, BN, warps, stages) | regs | spill B | smem KB | HGMMA | UTMALDG | HMMA |")
    print("|---|---|---|---|---|---|---|---|---|")
    for kernel in args.kernels:
        for d in args.head_dims:
            for t in configs.sweep_candidates(kernel, d, 2):
                try:
                    r = resources(compile_variant(kernel, t, d, HAS_RIGHT=args.causal, HOST_DESC=args.host_desc))
                except Exception as exc:  # noqa: BLE001  (reported, not fatal)
                    print(f"| {kernel} | {d} | {tuple(t.__dict__.values())} | {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0][:60]} |")
                    continue
                print(f"| {kernel} | {d} | {(t.block_m, t.block_n, t.num_warps, t.num_stages)} | {r['regs']} | "
                      f"{r['spill_bytes']} | {r['smem'] / 1024:.0f} | {r['hgmma']} | {r['utmaldg']} | {r['hmma']} |",
                      flush=True)


if __name__ == "__main__":
    main()
