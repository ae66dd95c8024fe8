"""Offline sm_90a compile report of kernels/fwd_gluon.py (the hand-scheduled Gluon
forward, non-causal and CAUSAL, one block a CTA or PERSISTENT): registers (ptxas -v, the kernel-wide allocation) and
the setmaxnreg values of each partition, spill bytes, shared memory, wgmma in the PTX
(wgmma.mma_async, against mma.sync) and HGMMA / UTMALDG / UTMASTG in the SASS. No GPU
needed.

    PYTHONPATH=src python bench/gluon_fwd_compile.py              # the table
    PYTHONPATH=src python bench/gluon_fwd_compile.py --dump OUT    # also OUT/<variant>.{ttgir,ptx}

PERSISTENT (2026-12-01, offline): 0 spills, the same setmaxnreg split (240 / 240 / 24),
224 KB shared memory at D = 128 (one more mbarrier, q_free), 12 UTMALDG (the loader's two
K / V loops, before and after the Q load). PERSISTENT=False: SASS identical to
the kernel before it (addresses stripped; 7 variants), PTX differing only in the kernel's
one new parameter (batch, read by PERSISTENT alone; compile_fwd(batch_param=False) gives
the old signature for compiling the old source).

WINDOW (2026-12-01, session 25, offline): sliding window, one block a CTA and PERSISTENT,
D = 128 / 64, bf16 / fp16: 0 spills, setmaxnreg 240 / 240 / 24, 224 KB (D = 128) / 112 KB
(D = 64) shared memory, 128 wgmma in the PTX at D = 128 (three loops a consumer), 6
DEPBAR.LE 1. The kernel has two more parameters (win_left, win_right; compile_fwd(
window_params=False) gives the signature before them); the 26 non-window variants above
compile to the SASS of before (addresses stripped).

DROPOUT (2026-12-01, session 26, offline): the library's dropout mask (kernels/fwd_gluon.py
DROPOUT), the last 17 rows: 12 warps, setmaxnreg 240 / 240 / 24, shared memory unchanged
(224 KB at D = 128, 112 KB at D = 64); spills 0 plain (one block, PERSISTENT, BLOCK_N 64,
PINGPONG, D = 128 / 64), 8 bytes CAUSAL one block, 464 CAUSAL PERSISTENT, 512 SCHEDULED,
1564 / 2044 WINDOW one block / PERSISTENT at D = 128 (0 at D = 64). Four more kernel
parameters (RNG, dropout_p, rng_rows, rng_stride; compile_fwd(dropout_params=False) gives
the signature before them); the 39 variants without DROPOUT compile to the SASS of before
(addresses stripped).
Session 26, later (offline): the keep test as an integer compare + select (kernels/fwd_gluon.py
dropout_keep_select, 4 instructions an element instead of 5): spills D = 128 plain 0,
PERSISTENT 16, CAUSAL 24, CAUSAL PERSISTENT 160, SCHEDULED 160, WINDOW 460 / 768, D = 64 all
0 (the DROPOUT docstring has the loop sizes); the 39 variants without DROPOUT: SASS
unchanged (addresses stripped).
Session 27: two options compiled here offline, then measured slower on the H200 (bench/NOTES.md,
"Session 27", call 1) and removed from kernels/fwd_gluon.py: the integer keep test in CAUSAL
one-block dropout (setmaxnreg 248 / 232 / 24; 5-12% slower) and PV_OVERLAP (a never-taken
branch before the full wgmma wait; 1-3.4% slower). Removing them left the SASS of every variant
below unchanged.

O_STAGE (session 42): the last 7 rows (PERSISTENT; O through the last K stage): 0 spills, 224 KB (D = 128) / 112 KB
(D = 64), 2 UTMASTG, tile loops as the kernels without it (plain 452 / 451, causal 484 / 713, the LEAN window 751 /
517 / 713 SASS instructions a warp); the 98 earlier variants byte-identical (bench/gluon_fwd_sass_hash.py, which
now also passes OWN_TILES and O_STAGE: before, the OWN_TILES rows hashed the kernel without it).

NUM_CONSUMERS = 3 (session 29, offline): the last 5 rows (plain PERSISTENT, D = 64, BLOCK_M 192):
16 warps, .maxnreg 128, setmaxnreg 168 (default partition = consumer 0) / 160 / 160 / 24
inside the partitions (256 / 80 outside), 0 spills, 120 KB shared memory (3 stages; 4: 152,
6: 216), 72 HGMMA, 7 UTMALDG, 3 UTMASTG; tile loops 411 instructions a warp each (3 consumers)
against the 2-consumer kernel's 409 / 411. compile_fwd(num_consumers=3); the kernel flags
after CAUSAL are all in the signature once the kernel has NUM_CONSUMERS (the offline compile
does not apply parameter defaults). The 56 earlier variants: SASS byte-identical to before
(addresses stripped). New column "tile loops": SASS instructions of each consumer tile loop
(a backward branch's body with one S and one P V wgmma issue; tile_loops()).

NUM_CONSUMERS = 3 with CAUSAL, one block a CTA (session 29, a helper, offline): the last 4 rows
(D = 64, BLOCK_M 192): 16 warps, .maxnreg 128, setmaxnreg 168 / 160 / 160 / 24, 120 KB shared
memory (4 stages 152), 108 HGMMA, 5 UTMALDG, 3 UTMASTG, 6 DEPBAR.LE 1; SPILLS 160 bytes (4
stages 248): 0 in the unmasked tile loops (451 / 451 / 447 instructions), 6 STL + 6 LDL in two
consumers' masked loop (717; one tile a block) and 2 + 2 in the third's (728), the rest once a
block. The 61 earlier variants: SASS byte-identical to before (addresses stripped).

LEAN_MASK (session 30, a helper, offline; kernels/fwd_gluon.py _softmax_step_lean): the last 6 rows
(WINDOW D = 128 one block a CTA bf16 / fp16 / negative scale / PINGPONG, PERSISTENT, PERSISTENT
EARLY_Q): 0 spills, the same setmaxnreg split and shared memory; WINDOW D = 128 one block tile
loops (left-masked / unmasked / diagonal) 756 / 522 / 718 and 755 / 521 / 715 against 820 / 522
/ 852 and 819 / 519 / 849 without it; the peel -62 a warp (both edges) or -126 (the left edge
alone, its runtime branch, one block a CTA only: PERSISTENT spilled 88-92 bytes with it; whole
kernel 7,968 SASS instructions against 7,592: the peel's softmax is there twice, one path
runs). D = 64 (not allowed: static_assert) spilled 8 bytes, one register once a block.
PERSISTENT loops 750 / 517 / 713, EARLY_Q 755 / 526 / 722 (against 815 / 517 / 847 and 817 /
526 / 856). compile_fwd(lean_mask=True); the 71 earlier variants:
SASS byte-identical to before (bench/gluon_fwd_sass_hash.py, addresses stripped).

D = 256 (a session-31 helper, offline; kernels/fwd_gluon.py D256): the last 16 rows (BLOCK_M 128,
BLOCK_N 64, 2 stages; the 15th element of a row is SPLIT_EMPTY, compile_fwd(split_empty=True)): 12
warps, setmaxnreg 240 / 240 / 24, 0 spills everywhere, 192 KB + 288 B shared memory, HGMMA 80
plain / 120 CAUSAL, 16 UTMALDG (24 PERSISTENT), DEPBAR.LE 1 in every tile loop; tile loops plain
415 / 413 (406 / 404 without SPLIT_EMPTY), PERSISTENT 412 / 408 without; BLOCK_N 32 x 4 stages 328 /
323 (half the keys a tile). The last two rows: SPLIT_EMPTY at D = 128 (compiles; not used). The 77
earlier variants: SASS byte-identical to before (bench/gluon_fwd_sass_hash.py).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon.language import NVMMASharedLayout

from flashtriton.bench.compile_report import _NVBIN, resources
from flashtriton.kernels.fwd_gluon import CONSUMERS3_CONFIG, DEFAULT_CONFIG, attn_fwd_gluon_kernel

_DT = {"bf16": tl.bfloat16, "fp16": tl.float16}


def desc_type(dtype: str, rows: int, head_dim: int) -> str:
    """The kernel type string of a host TensorDescriptor with a (rows, head_dim) box (the
    one Triton's binder makes: the layout's repr after the block shape)."""
    layout = NVMMASharedLayout.get_default_for([rows, head_dim], _DT[dtype])
    return f"tensordesc<{dtype}[{rows}, {head_dim}],{layout!r}>"


def compile_fwd(head_dim=128, dtype="bf16", block_m=None, block_n=None, num_stages=None, neg_scale=False,
                pingpong=False, causal=False, persistent=False, batch_param=True, scheduled=False, window=False,
                window_params=True, dropout=False, dropout_params=True, num_consumers=2, early_q=False,
                lean_mask=False, split_empty=False, own_tiles=False, timeline=False, o_stage=False,
                varlen=False, varlen_fast=False, varlen_order=False, varlen_tail=False, varlen_half=False,
                page_size=0):
    bm, bn, st = (CONSUMERS3_CONFIG if num_consumers == 3 else DEFAULT_CONFIG)[head_dim]
    bm, bn, st = block_m or bm, block_n or bn, num_stages or st
    fn = attn_fwd_gluon_kernel
    wg_m = bm // num_consumers
    sig = dict(q_desc=desc_type(dtype, wg_m, head_dim), k_desc=desc_type(dtype, bn, head_dim),
               v_desc=desc_type(dtype, bn, head_dim), o_desc=desc_type(dtype, wg_m, head_dim),
               LSE="*fp32", seqlen_q="i32", seqlen_k="i32", nheads="i32", group="i32", qk_scale="fp32",
               **({"batch": "i32", "band": "i32", "SCHED": "*i32" if (scheduled or varlen) else ("*i64" if timeline else "*fp32")}
                  if batch_param else {}),
               **({"win_left": "i32", "win_right": "i32"} if window_params else {}),
               **({"RNG": "*i64", "dropout_p": "fp32", "rng_rows": "i32", "rng_stride": "i32"}
                  if dropout_params else {}),
               # EARLY_Q's output pointer and row stride (session 29 helper), when the kernel has them
               **({"O": "*" + dtype} if "EARLY_Q" in fn.arg_names else {}),
               HEAD_DIM="constexpr", BLOCK_M="constexpr", BLOCK_N="constexpr", NUM_STAGES="constexpr",
               NEG_SCALE="constexpr", PINGPONG="constexpr", CAUSAL="constexpr")
    const = dict(HEAD_DIM=head_dim, BLOCK_M=bm, BLOCK_N=bn, NUM_STAGES=st, NEG_SCALE=neg_scale, PINGPONG=pingpong,
                 CAUSAL=causal)
    # the flags after CAUSAL join the signature when set (so that compile_fwd also compiles the
    # older sources, without them), and all of them once the kernel has NUM_CONSUMERS: the
    # offline compile does not apply a parameter's default, and NUM_CONSUMERS must be a number
    has_nc = "NUM_CONSUMERS" in fn.arg_names
    if persistent or scheduled or window or dropout or has_nc:
        sig["PERSISTENT"] = "constexpr"
        const["PERSISTENT"] = bool(persistent)
    if scheduled or window or dropout or has_nc:
        sig["SCHEDULED"] = "constexpr"
        const["SCHEDULED"] = bool(scheduled)
    if window or dropout or has_nc:
        sig["WINDOW"] = "constexpr"
        const["WINDOW"] = bool(window)
    if dropout or has_nc:
        sig["DROPOUT"] = "constexpr"
        const["DROPOUT"] = bool(dropout)
    if has_nc:
        sig["NUM_CONSUMERS"] = "constexpr"
        const["NUM_CONSUMERS"] = num_consumers
    if "EARLY_Q" in fn.arg_names:
        sig["EARLY_Q"] = "constexpr"
        const["EARLY_Q"] = bool(early_q)
    if "LEAN_MASK" in fn.arg_names:
        sig["LEAN_MASK"] = "constexpr"
        const["LEAN_MASK"] = bool(lean_mask)
    if "SPLIT_EMPTY" in fn.arg_names:
        sig["SPLIT_EMPTY"] = "constexpr"
        const["SPLIT_EMPTY"] = bool(split_empty)
    if "OWN_TILES" in fn.arg_names:
        sig["OWN_TILES"] = "constexpr"
        const["OWN_TILES"] = bool(own_tiles)
    if "TIMELINE" in fn.arg_names:
        sig["TIMELINE"] = "constexpr"
        const["TIMELINE"] = bool(timeline)
    if "O_STAGE" in fn.arg_names:
        sig["O_STAGE"] = "constexpr"
        const["O_STAGE"] = bool(o_stage)
    if "VARLEN" in fn.arg_names:
        sig["VARLEN"] = "constexpr"
        const["VARLEN"] = bool(varlen)
    if "VARLEN_FAST" in fn.arg_names:
        sig["VARLEN_ORDER"] = "constexpr"
        const["VARLEN_ORDER"] = bool(varlen_order)
        sig["VARLEN_FAST"] = "constexpr"
        const["VARLEN_FAST"] = bool(varlen_fast)
    if varlen_tail:
        sig["VARLEN_TAIL"] = "constexpr"        # (session 50; left out otherwise, as the launcher does)
        const["VARLEN_TAIL"] = True
    if varlen_half:
        sig["VARLEN_HALF"] = "constexpr"        # (session 51; left out otherwise, as the launcher does)
        const["VARLEN_HALF"] = True
    if page_size:
        # VARLEN_PAGED (session 51): the block table, its row stride, the page size; left out otherwise
        sig.update(BLOCK_TABLE="*i32", bt_stride="i32", PAGE_SIZE="constexpr")
        const["PAGE_SIZE"] = page_size
    # EARLY_Q: O 16-byte aligned, as the JIT specialises a torch tensor's pointer (the
    # kernel's 4-byte O stores need it; the TMA paths do not read this pointer)
    attrs = {(fn.arg_names.index("O"),): [["tt.divisibility", 16]]} if (early_q or varlen) else {}
    src = GluonASTSource(fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in const.items()},
                         attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4))


def sass(compiled) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.cubin")
        with open(path, "wb") as f:
            f.write(compiled.asm["cubin"])
        return subprocess.run([os.path.join(_NVBIN, "cuobjdump"), "--dump-sass", path],
                              capture_output=True, text=True).stdout


def tile_loops(text: str) -> list:
    """SASS instructions of each consumer tile loop (a backward branch's body holding one S and
    one P V wgmma issue: 2 WARPGROUP.ARRIVE, HGMMA), in code order: one tile of one warp."""
    ins = [(int(a, 16), t.strip()) for a, t in re.findall(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", text)]
    at = {a: i for i, (a, _) in enumerate(ins)}
    sizes = []
    for i, (a, t) in enumerate(ins):
        m = re.search(r"BRA\s+0x([0-9a-f]+)", t)
        if m and int(m.group(1), 16) <= a and int(m.group(1), 16) in at:
            body = [x for _, x in ins[at[int(m.group(1), 16)]:i + 1]]
            if sum("WARPGROUP.ARRIVE" in x for x in body) == 2 and any("HGMMA" in x for x in body):
                sizes.append(len(body))
    return sizes


def report(compiled) -> dict:
    """resources() (ptxas -v registers and spills, shared memory, HGMMA / UTMALDG) plus:
    setmaxnreg values in the PTX, wgmma.mma_async / mma.sync in the PTX, UTMASTG and
    'WARPGROUP.DEPBAR.LE gsb0, 0x1' (a wait that leaves one wgmma group in flight: the
    P V wgmma running under the softmax) in the SASS."""
    r = resources(compiled)
    ptx = compiled.asm["ptx"]
    text = sass(compiled)
    r.update(
        setmaxnreg=sorted(set(re.findall(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+)", ptx))),
        wgmma_ptx=len(re.findall(r"wgmma\.mma_async", ptx)),
        mma_sync_ptx=len(re.findall(r"\bmma\.sync", ptx)),
        warps=compiled.metadata.num_warps,
        utmastg=text.count("UTMASTG"),
        depbar1=len(re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x1", text)),
        tile_loops=tile_loops(text),
    )
    return r


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dump", default=None)
    args = ap.parse_args(argv)
    # (D, dtype, BLOCK_N, NUM_STAGES, PINGPONG, NEG_SCALE, CAUSAL[, PERSISTENT[, SCHEDULED[, WINDOW[, DROPOUT
    # [, NUM_CONSUMERS[, EARLY_Q[, LEAN_MASK[, SPLIT_EMPTY[, OWN_TILES]]]]]]]]]); None: DEFAULT_CONFIG's (CONSUMERS3_CONFIG's with 3 consumers)
    variants = [
        (128, "bf16", None, None, False, False, False), (128, "fp16", None, None, False, False, False),
        (128, "bf16", None, None, False, True, False), (128, "bf16", None, None, True, False, False),
        (128, "bf16", None, 3, False, False, False), (128, "bf16", 64, 4, False, False, False),
        (128, "bf16", 64, 4, True, False, False),
        (64, "bf16", None, None, False, False, False), (64, "fp16", None, None, False, False, False),
        (64, "bf16", None, 4, False, False, False), (64, "bf16", None, 6, False, False, False),
        # CAUSAL (session 23, 2026-12-01): the unmasked and the masked loop
        (128, "bf16", None, None, False, False, True), (128, "fp16", None, None, False, False, True),
        (128, "bf16", None, None, False, True, True), (128, "bf16", None, None, True, False, True),
        (128, "bf16", 64, 4, False, False, True),
        (64, "bf16", None, None, False, False, True), (64, "bf16", None, 4, False, False, True),
        # PERSISTENT (session 23, 2026-12-01, for session 24's A/B)
        (128, "bf16", None, None, False, False, False, True), (128, "fp16", None, None, False, True, False, True),
        (128, "bf16", None, None, False, False, True, True), (64, "bf16", None, None, False, False, False, True),
        (64, "bf16", None, None, False, False, True, True), (64, "bf16", None, 4, False, False, True, True),
        # SCHEDULED (session 24, 2026-12-01: the host's longest-first deal, persistent causal)
        (128, "bf16", None, None, False, False, True, True, True), (128, "fp16", None, None, False, True, True, True, True),
        (64, "bf16", None, None, False, False, True, True, True),
        # WINDOW (session 25, 2026-12-01): sliding window, one block a CTA and PERSISTENT
        (128, "bf16", None, None, False, False, False, False, False, True),
        (128, "fp16", None, None, False, False, False, False, False, True),
        (128, "bf16", None, None, False, True, False, False, False, True),
        (128, "bf16", None, None, True, False, False, False, False, True),
        (128, "bf16", 64, 4, False, False, False, False, False, True),
        (64, "bf16", None, None, False, False, False, False, False, True),
        (64, "fp16", None, None, False, False, False, False, False, True),
        (128, "bf16", None, None, False, False, False, True, False, True),
        (128, "fp16", None, None, False, False, False, True, False, True),
        (64, "bf16", None, None, False, False, False, True, False, True),
        (64, "fp16", None, None, False, False, False, True, False, True),
        (64, "bf16", None, 4, False, False, False, True, False, True),
        # DROPOUT (session 26, 2026-12-01): the library's mask, plain / causal / window, one block a
        # CTA and PERSISTENT; BLOCK_N 64 hashes its in-group column keys per tile
        (128, "bf16", None, None, False, False, False, False, False, False, True),
        (128, "fp16", None, None, False, False, False, False, False, False, True),
        (128, "bf16", None, None, False, True, False, False, False, False, True),
        (128, "bf16", None, None, True, False, False, False, False, False, True),
        (128, "bf16", 64, 4, False, False, False, False, False, False, True),
        (128, "bf16", None, None, False, False, False, True, False, False, True),
        (128, "fp16", None, None, False, False, False, True, False, False, True),
        (128, "bf16", None, None, False, False, True, False, False, False, True),
        (128, "fp16", None, None, False, False, True, False, False, False, True),
        (128, "bf16", None, None, False, False, True, True, False, False, True),
        (128, "bf16", None, None, False, False, True, True, True, False, True),
        (128, "bf16", None, None, False, False, False, False, False, True, True),
        (128, "bf16", None, None, False, False, False, True, False, True, True),
        (64, "bf16", None, None, False, False, False, False, False, False, True),
        (64, "fp16", None, None, False, False, False, True, False, False, True),
        (64, "bf16", None, None, False, False, True, False, False, False, True),
        (64, "bf16", None, None, False, False, False, False, False, True, True),
        # NUM_CONSUMERS = 3 (session 29): plain PERSISTENT, 192 query rows a CTA, D = 64
        (64, "bf16", None, None, False, False, False, True, False, False, False, 3),
        (64, "fp16", None, None, False, False, False, True, False, False, False, 3),
        (64, "bf16", None, None, False, True, False, True, False, False, False, 3),
        (64, "bf16", None, 4, False, False, False, True, False, False, False, 3),
        (64, "bf16", None, 6, False, False, False, True, False, False, False, 3),
        # NUM_CONSUMERS = 3, CAUSAL one block a CTA (session 29, a helper, offline): 192-row blocks
        (64, "bf16", None, None, False, False, True, False, False, False, False, 3),
        (64, "fp16", None, None, False, False, True, False, False, False, False, 3),
        (64, "bf16", None, None, False, True, True, False, False, False, False, 3),
        (64, "bf16", None, 4, False, False, True, False, False, False, False, 3),
        # EARLY_Q (session 29 helper, offline): PERSISTENT, 2 consumers, the next block's Q under
        # this block's last tile, O by global stores; WINDOW (the target) and plain / CAUSAL
        (128, "bf16", None, None, False, False, False, True, False, True, False, 2, True),
        (128, "fp16", None, None, False, False, False, True, False, True, False, 2, True),
        (128, "bf16", None, None, False, True, False, True, False, True, False, 2, True),
        (64, "bf16", None, None, False, False, False, True, False, True, False, 2, True),
        (128, "bf16", None, None, False, False, False, True, False, False, False, 2, True),
        (128, "bf16", None, None, False, False, True, True, False, False, False, 2, True),
        # LEAN_MASK (session 30 helper, offline): WINDOW's masked tiles with one compare a score (one
        # predicate and one select, the right-edge loop one-sided); one block a CTA (the route),
        # PERSISTENT, EARLY_Q, PINGPONG; D = 128 only (static_assert: D = 64 spilled 8 bytes)
        (128, "bf16", None, None, False, False, False, False, False, True, False, 2, False, True),
        (128, "fp16", None, None, False, False, False, False, False, True, False, 2, False, True),
        (128, "bf16", None, None, False, True, False, False, False, True, False, 2, False, True),
        (128, "bf16", None, None, True, False, False, False, False, True, False, 2, False, True),
        (128, "bf16", None, None, False, False, False, True, False, True, False, 2, False, True),
        (128, "bf16", None, None, False, False, False, True, False, True, False, 2, True, True),
        # D = 256 (a session-31 helper, offline; not routed): BLOCK_M 128, BLOCK_N 64, 2 stages (192 KB),
        # SPLIT_EMPTY (K's and V's stages released apart: the launcher's default at D = 256) and
        # without it; plain one block / PERSISTENT, CAUSAL one block / PERSISTENT, fp16, negative
        # scale, PINGPONG, BLOCK_N 32 x 4 stages
        (256, "bf16", None, None, False, False, False, False, False, False, False, 2, False, False, True),
        (256, "fp16", None, None, False, False, False, False, False, False, False, 2, False, False, True),
        (256, "bf16", None, None, False, True, False, False, False, False, False, 2, False, False, True),
        (256, "bf16", None, None, True, False, False, False, False, False, False, 2, False, False, True),
        (256, "bf16", 32, 4, False, False, False, False, False, False, False, 2, False, False, True),
        (256, "bf16", None, None, False, False, False, True, False, False, False, 2, False, False, True),
        (256, "fp16", None, None, False, False, False, True, False, False, False, 2, False, False, True),
        (256, "bf16", None, None, False, False, True, False, False, False, False, 2, False, False, True),
        (256, "fp16", None, None, False, False, True, False, False, False, False, 2, False, False, True),
        (256, "bf16", None, None, False, True, True, False, False, False, False, 2, False, False, True),
        (256, "bf16", None, None, False, False, True, True, False, False, False, 2, False, False, True),
        (256, "bf16", None, None, False, False, False, False),
        (256, "bf16", None, None, False, False, False, True),
        (256, "bf16", None, None, False, False, True),
        (128, "bf16", None, None, False, False, False, False, False, False, False, 2, False, False, True),
        (128, "bf16", None, None, False, False, False, True, False, False, False, 2, False, False, True),
        # OWN_TILES (session 38): CAUSAL one block a CTA, each consumer computing only its rows' key
        # tiles; D = 256 with and without SPLIT_EMPTY, fp16, negative scale; D = 128 at BLOCK_N 64
        (256, "bf16", None, None, False, False, True, False, False, False, False, 2, False, False, True, True),
        (256, "fp16", None, None, False, False, True, False, False, False, False, 2, False, False, True, True),
        (256, "bf16", None, None, False, True, True, False, False, False, False, 2, False, False, True, True),
        (256, "bf16", None, None, False, False, True, False, False, False, False, 2, False, False, False, True),
        (128, "bf16", 64, 4, False, False, True, False, False, False, False, 2, False, False, False, True),
        # O_STAGE (session 42): PERSISTENT, O through the last K stage; plain bf16 / fp16, causal (banded and
        # SCHEDULED, negative scale), the LEAN_MASK window, D = 64 plain / causal
        (128, "bf16", None, None, False, False, False, True, False, False, False, 2, False, False, False, False, True),
        (128, "fp16", None, None, False, False, False, True, False, False, False, 2, False, False, False, False, True),
        (128, "bf16", None, None, False, False, True, True, False, False, False, 2, False, False, False, False, True),
        (128, "bf16", None, None, False, True, True, True, True, False, False, 2, False, False, False, False, True),
        (128, "bf16", None, None, False, False, False, True, False, True, False, 2, False, True, False, False, True),
        (64, "bf16", None, None, False, False, False, True, False, False, False, 2, False, False, False, False, True),
        (64, "bf16", None, None, False, False, True, True, True, False, False, 2, False, False, False, False, True),
    ]
    print("| D | dtype | BM, BN, stages | pingpong | neg scale | causal | persistent | window | dropout | warps | "
          "regs (kernel) | setmaxnreg | "
          "spill B | smem KB | wgmma PTX | mma.sync | HGMMA | DEPBAR.LE 1 | UTMALDG | UTMASTG | tile loops |")
    print("|" + "---|" * 21)
    for d, dt, bn, st, pp, neg, causal, *rest in variants:
        pers = bool(rest and rest[0])
        sched = bool(len(rest) > 1 and rest[1])
        win = bool(len(rest) > 2 and rest[2])
        drop = bool(len(rest) > 3 and rest[3])
        nc = rest[4] if len(rest) > 4 else 2
        eq = bool(len(rest) > 5 and rest[5])
        lean = bool(len(rest) > 6 and rest[6])
        split = bool(len(rest) > 7 and rest[7])
        own = bool(len(rest) > 8 and rest[8])
        ost = bool(len(rest) > 9 and rest[9])
        bm, bn0, st0 = (CONSUMERS3_CONFIG if nc == 3 else DEFAULT_CONFIG)[d]
        cfg = (bm, bn or bn0, st or st0)
        try:
            c = compile_fwd(d, dt, *cfg, neg_scale=neg, pingpong=pp, causal=causal, persistent=pers, scheduled=sched,
                            window=win, dropout=drop, num_consumers=nc, early_q=eq, lean_mask=lean,
                            split_empty=split, own_tiles=own, o_stage=ost)
            r = report(c)
        except Exception as exc:  # noqa: BLE001  (reported, not fatal)
            print(f"| {d} | {dt} | {cfg} | {pp} | {neg} | {causal} | {pers} | {win} | {drop} | {type(exc).__name__}: "
                  f"{str(exc).strip().splitlines()[-1][:120]} |", flush=True)
            continue
        regs = ", ".join(f"{a} {n}" for a, n in r["setmaxnreg"])
        kind = (f"{pers}{' sched' if sched else ''}{' 3wg' if nc == 3 else ''}{' early-q' if eq else ''}"
                f"{' split' if split else ''}{' own' if own else ''}{' o-stage' if ost else ''}")
        print(f"| {d} | {dt} | {cfg} | {pp} | {neg} | {causal} | {kind} | {win}{' lean' if lean else ''} | {drop} | "
              f"{r['warps']} | {r['regs']} | {regs} | "
              f"{r['spill_bytes']} | "
              f"{r['smem'] / 1024:.0f} | {r['wgmma_ptx']} | {r['mma_sync_ptx']} | {r['hgmma']} | {r['depbar1']} | "
              f"{r['utmaldg']} | {r['utmastg']} | {', '.join(map(str, r['tile_loops']))} |", flush=True)
        if args.dump:
            os.makedirs(args.dump, exist_ok=True)
            name = (f"d{d}_{dt}_{cfg[0]}x{cfg[1]}x{cfg[2]}{'_pp' if pp else ''}{'_neg' if neg else ''}"
                    f"{'_causal' if causal else ''}{'_persistent' if pers else ''}{'_sched' if sched else ''}"
                    f"{'_window' if win else ''}{'_dropout' if drop else ''}{'_3wg' if nc == 3 else ''}"
                    f"{'_earlyq' if eq else ''}{'_lean' if lean else ''}{'_split' if split else ''}"
                    f"{'_own' if own else ''}{'_ostage' if ost else ''}")
            for ext in ("ttgir", "ptx"):
                with open(os.path.join(args.dump, f"{name}.{ext}"), "w") as f:
                    f.write(c.asm[ext])


if __name__ == "__main__":
    main()
