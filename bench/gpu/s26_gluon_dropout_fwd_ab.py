"""Session 27 removed CAUSAL_DROPOUT_KEEP "lean" after ab-causal measured it 5-12% slower: ab-causal no longer runs.
Session 26: the Gluon forward's DROPOUT variant (kernels/fwd_gluon.py, written offline in
session 26 and never run yet) against the library's dropout forward (flash_attn_func(
dropout_p=0.1) today: fwd_ws.py HAS_DROPOUT unmasked, fwd.py causal; 1.44x the time of the
Gluon forward without dropout at 4k, D = 128) and against the Gluon forward without
dropout. Issue: "dropout p=0.1 forward+backward costs at most 1.15x the time without
dropout".

What changed (patch gluon-fwd-dropout.patch, branch wip-fwd-dropout, 2026-12-01):
  - kernels/fwd_gluon.py: DROPOUT constexpr (plain, CAUSAL, WINDOW; one block a CTA and
    PERSISTENT; any BLOCK_N <= 128), runtime RNG (int64 (seed, offset)), dropout_p,
    rng_rows = B * Nq, rng_stride = Nk: the library's counter layout. Per consumer and
    block (_dropout_setup): row keys of its 64 rows (kernels/common.py dropout_row_key at
    rng_offset + (h * B * Nq + b * Nq + row) * Nk), the seed's column words, the 128
    in-group column keys once (BLOCK_N == DROPOUT_GROUP; BLOCK_N 64 hashes them per tile).
    Per tile (_dropout_tile, after the softmax step, so l sums the undropped P): the group
    key xor-ed into the 2 row keys a thread holds, the group multiplier (uniform), then per
    element common.dropout_keep_scale ((rk ^ ck) * mk, top 23 bits as a float's mantissa,
    FFMA.SAT) and p *= keep; the epilogue divides by l * (1 - p). The hashes are
    kernels/common.py's own @triton.jit functions, called from the Gluon consumers.
    Kernels without DROPOUT: SASS unchanged (39 variants, addresses stripped).
  - launchers/forward_gluon.py: prepare / attention_fwd_gluon / fwd_into(..., dropout_p=,
    rng=), check_dropout (ValueError naming dropout_p / rng, before any launch).
  - launchers/policy.py: gluon_fwd_dropout + GLUON_FWD_DROPOUT_MIN_N = {} (NOT routed
    until this A/B: fill e.g. {"plain": {128: 1024}} from its numbers); launchers/
    forward.py routes there (with the call's rng) when the table admits a call.
  - tests/test_fwd_gluon.py: CPU: the kernel's mask functions against the S_dmask kernel
    and a numpy model, bitwise; validation; the rule and the route. GPU: the mask decoded
    from the kernel's output bitwise (q = 0, v one-hot), out / lse against float64 with
    the library's mask and against the library's dropout forward, persistent bitwise,
    flash_attn_func through the route with the backward.

    export PYTHONPATH=src S=bench/gpu/s26_gluon_dropout_fwd_ab.py
    timeout 300 python $S smoke      # first: a hang = barrier bug (~30-120 s, compiles included)
    timeout 300 python $S ab         # the A/B (~1-2 min)
    (python $S with no argument runs smoke then ab)
    python -m pytest tests/test_fwd_gluon.py -q -o addopts="" -m gpu -k dropout   # then the tests

smoke: a dozen small calls (B = 2, GQA), each with p = 0.1 against float64 on one (batch,
head) with the library's mask (launchers.forward.dropout_mask; the tests' criterion: error
<= 2x PyTorch's bf16 error, lse too), against the library's dropout forward (max |out|
difference, lse difference), persistent ones also bitwise against one block a CTA; plus
one call whose mask is decoded from the output (q = 0, v one-hot: out * l * (1 - p) is
the keep bit) and compared bitwise with dropout_mask. Each printed, none raising.

ab: D = 128, bf16, 16k tokens (B = 16k / N), H = 16, N in {4k, 16k}, p = 0.1, plain and
causal: Gluon DROPOUT (one block a CTA, and PERSISTENT for plain: the no-dropout route's
choice), the library's dropout forward as routed today (launchers.forward.fwd with the rng:
fwd_ws.py / fwd.py), and the Gluon forward without dropout as routed (PERSISTENT plain,
one block causal), all CUDA-graph replays (bench.common.graph_time_ms: L2 flushed, no host
overhead; eager "*" where a capture fails), two rounds, the second in reverse order.
TFLOP/s by attention_flops (dropout FLOPs not counted); the ratio column is
time / time of the Gluon forward without dropout (the issue's measure, forward part).

Offline (bench/gluon_fwd_compile.py, sm_90a, 2026-12-01): DROPOUT 12 warps, setmaxnreg
240 / 240 / 24, 224 KB shared memory at D = 128 (112 KB at D = 64); spills: plain one
block / PERSISTENT / BLOCK_N 64 / PINGPONG / D = 64: 0 bytes; CAUSAL one block 8 bytes
(D = 128 and 64), CAUSAL PERSISTENT 464, SCHEDULED 512; WINDOW 1564 (one block) / 2044
(PERSISTENT) at D = 128, 0 at D = 64. The 128 in-group column keys a consumer holds
cost 32 registers a thread for the whole block; the masked variants were already close
to the 240 budget.

PREDICTION (written before any measurement; none this session). FLOPs: 4 * D = 512 a
(query, key) pair, unchanged (dropout's work is not counted). Extra work an S element (64 a
thread a tile), read off the sm_90a SASS of the plain D = 128 kernel: exactly 5
instructions, LOP3.LUT 0x96 (rk ^ tile group key ^ ck, a 3-input xor: the group key costs
nothing per element), IMAD (* mk, uniform), LEA.HI (x >> 9 | 0x3F800000), FFMA.SAT (the
0 / 1 keep), FMUL (p * keep); per tile ~20 uniform ops (group key and multiplier), per
block ~150 ops a thread (row keys, 32 in-group column hashes). The softmax today issues
~5.5 instructions an element (FFMA, MUFU.EX2, FADD, FMNMX, F2FP / 2, the O rescale FMUL),
so the non-tensor issue nearly doubles: per 64 x 128 tile of each of the two consumer
warpgroups ~350 -> ~670 issue cycles an SM sub-partition set, against ~1024 tensor cycles a
tile (512 FLOP an element at ~4096 FLOP/clk/SM) and ~2900 cycles per pair of tiles at
~690 TFLOP/s (70% of peak). Fully exposed, the extra ~640 cycles a pair would cost 1.22x;
the two warpgroups' softmax-under-wgmma overlap hides part of it. Expected: plain D = 128
at 4k / 16k 1.08-1.15x the time of the Gluon forward without dropout (centre 1.11x;
~600-640 TFLOP/s if no-dropout is ~660-690), so 1.25-1.35x faster than the library's
dropout forward (fwd_ws.py, 1.44x the no-dropout Gluon time); PERSISTENT ahead of one
block by the no-dropout margin (+3-8%). Causal (one block, 8 bytes of spill): 1.10-1.18x
the Gluon causal time, 1.4-1.7x faster than fwd.py's causal dropout. Outputs: within the
float64 criterion; lse within a few fp32 ulps of the library's (fwd_ws.py: likely
bitwise, the same softmax order); PERSISTENT bitwise equal to one block a CTA; the decoded
mask bitwise the library's. If plain lands above 1.12x: an integer compare and a select
(ISETP + FSEL on p: 4 instructions an element instead of 5; session 10 avoided booleans
because LLVM packed fwd_ws.py's unused-at-once mask into bit fields, but here the keep is
used at once), or 16 packed in-group key pairs to free registers for the masked variants.

MEASURED (H200, s26/call1, the float keep test): dropout p = 0.1 forward / no-dropout forward,
plain 4k 1.19x (539 vs 639 TFLOP/s), 16k 1.18-1.26x (526-552 vs 650-661); causal 4k 1.22x
(442 vs 541), 16k 1.17-1.20x (532 vs 622-636).

Session 26, later (patch gluon-fwd-dropout-lean.patch, offline; this script unchanged otherwise):
the per-element keep test is an integer compare + select inside P's packing conversion
(kernels/fwd_gluon.py dropout_keep_min / dropout_tile_hash / dropout_keep_select: LOP3,
IMAD, ISETP.GE.U32, SEL: 4 instructions an element, was 5), the same mask bitwise (CPU
tests: 2^20 random words and edge words a p against common.dropout_keep_scale /
dropout_keep_keys, every threshold floor in numpy; the bf16 operand bitwise the old one).
SASS of one consumer's tile step, D = 128 bf16, no dropout / s26 / now: plain 458 / 798 /
728, causal unmasked 490 / 800 / 754, causal diagonal 713 / 1110 / 989: the dropout's
extra issue a tile -21% plain, -15% causal unmasked, -30% diagonal. Spills: plain 0 (one
block), PERSISTENT 16 B (outside the tile loops), causal one block 24 B (one STL / LDL pair
in one consumer's diagonal loop).
PREDICTION (session 26, before s26/call4): if the overhead scales with the extra issue
(it did roughly in s26: +340 instructions a tile, ~1.2x), ratio to the no-dropout forward:
plain 4k 1.13-1.17x (centre 1.15), 16k 1.13-1.19x (1.15); causal 4k 1.15-1.20x (1.18),
16k 1.13-1.17x (1.15); i.e. +3-5% TFLOP/s over s26's dropout numbers (plain ~560-575,
causal 4k ~460, 16k ~545-555). Causal forward+backward at B = 2, N = 4k (forward 1.27x,
backward 1.07x, total 1.174x: the forward ~52% of the no-dropout time): forward ~1.21x,
total ~1.14-1.16x if the backward stays at 1.07x. Outputs, lse and the decoded mask bitwise the
s26 kernel's (the P operand is bitwise the old p * keep in bf16 / fp16). If causal stays
above 1.20x: the 16 IMAD.MOV copies in its unmasked loop and the 32 registers of in-group
keys (a table in shared memory, 512 B, read per tile) are next.

MEASURED (s26/call4, the integer test in every variant; the route on, so "library-drop"
ran the same Gluon kernel): plain 4k 1.16-1.17x, 16k 1.16-1.20x (persistent; one block
1.16-1.28x); causal 4k 1.24-1.26x, 16k 1.29-1.32x (predicted 1.15-1.20 / 1.13-1.17: causal
got slower: its one-block variant's 24 spill bytes, one STL / LDL pair in a diagonal loop).
So the kernel keeps the integer test in the unmasked variants only (fwd_gluon.py
LEAN_KEEP): offline, their SASS equals this call's, and the CAUSAL / WINDOW variants'
equals s26/call1's (addresses stripped, whole kernels).

Session 27 (patch gluon-causal-dropout-lean.patch, offline only, NOT yet run on a GPU):
kernels/fwd_gluon.py CAUSAL_DROPOUT_KEEP = "float" (default: the kernels above, SASS
unchanged) | "lean": the integer test in CAUSAL one block a CTA (not PINGPONG, not
PERSISTENT), peel, unmasked and diagonal loop, with setmaxnreg 248 / 232 / 24 for the two
consumers (CAUSAL_LEAN_CONSUMER_REGS = 232 for the worker; Triton then gives the default
partition 248). s26/call4's lean causal at 240 / 240 had one STL / LDL pair a tile in
consumer 0's diagonal loop (24 bytes); at 248 / 232: 8 bytes, one pair outside every tile
loop, as the float form. SASS of one consumer's loop body (consumer 0 / 1), D = 128 bf16,
float -> lean: unmasked 800 / 795 -> 755 / 741, diagonal 1110 / 1108 -> 1006 / 936 (no
dropout 490 / 489, 713 / 713): the dropout's extra issue a tile 308 -> 258 unmasked (-16%),
396 -> 258 diagonal (-35%); D = 64: 760 / 754 -> 694 / 687, 1015 / 1010 -> 888 / 881.
Still there: 19 / 14 IMAD.MOV a tile in the unmasked loops (the P operand copied into the
P V wgmma's A registers at the loop top; float 2), as in call 4's lean kernel.

    export PYTHONPATH=src S=bench/gpu/s26_gluon_dropout_fwd_ab.py
    timeout 540 python $S ab-causal     # ~2-4 min: 4 child processes (float, lean, lean, float)

ab-causal: D = 128 bf16, H = 16, causal, N = 4k (B = 4) and 16k (B = 1), p = 0.1, one
block a CTA with each form, each child against the Gluon causal forward without dropout
as routed (CUDA-graph replays, two rounds, the second in reverse order); a form is a module
constant read at compile time, so each child sets it before its first compile (Triton
refuses a kernel whose global changed). Checks: batch 0 / head 0 against float64 with the
library's mask, the library's dropout forward (launchers.forward.fwd), and the two forms'
out / lse against each other bitwise (the P operand is bitwise the same: p or +0 before
the same rounding).
PREDICTION (session 27, before any run): if the time overhead follows the extra issue a
tile as in s26 (float causal 16k 1.17-1.19x with ~308 extra instructions an unmasked
tile), lean: causal 16k 1.14-1.17x (centre 1.155), 4k 1.17-1.20x (1.185; the diagonal
tiles weigh more at 4k and lose 35%), float as before (16k 1.17-1.19x, 4k 1.21-1.23x);
outputs bitwise equal between the forms, float64 checks ok. Risk: call 4's lean causal
was 1.29-1.32x at 16k, far more than its one diagonal-loop spill pair can explain (1-2
diagonal tiles of ~64 a block on average at 16k), so something in its unmasked loop (the
IMAD.MOV copies, or the keep compares that ptxas hoists between the HGMMAs) may have cost
it; that is unchanged here. If lean lands >= 1.22x at 16k, keep "float" and look there.
Offline also (all variants, with and without dropout): every MUFU.EX2 of a tile comes
after WARPGROUP.DEPBAR.LE gsb0, 0x0, i.e. ptxas waits for the P V wgmma before the
softmax; the overlap is between the two consumers, not within one.
"""
import sys
import time
import traceback

import torch

from flashtriton import reference
from flashtriton.bench.common import attention_flops, graph_time_ms, time_ms
from flashtriton.launchers import forward, forward_gluon, policy
from flashtriton.launchers.common import AttnParams

TOKENS, HEADS, DTYPE, P = 16384, 16, torch.bfloat16, 0.1


def short(exc) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[-1][:300] if lines else ''}"


def inputs(d, nq, nk=None, b=None, h=HEADS, hk=None, seed=0):
    torch.manual_seed(seed)
    nk = nk or nq
    b = b or max(1, TOKENS // nq)
    q = torch.randn(b, nq, h, d, device="cuda", dtype=DTYPE)
    k, v = (torch.randn(b, nk, hk or h, d, device="cuda", dtype=DTYPE) for _ in range(2))
    return q, k, v


def rng_state(seed=1234):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    return torch.randint(0, 2 ** 62, (2,), dtype=torch.int64, device="cuda", generator=g)


def window_lr(causal, window):
    left, right = window if window is not None else (-1, -1)
    return left, (0 if causal else right)


def check_one_head(q, k, v, o, lse, scale, causal, window, rng):
    """(ok, text): batch 0, head 0 against float64 with the library's mask (dropout_mask
    of batch 0, head 0: its counters do not depend on B or H); error <= 2x the same-dtype
    torch error, lse too; rows that see no key O = 0 and lse = +inf."""
    left, right = window_lr(causal, window)
    args = [t[:1, :, :1] for t in (q, k, v)]
    keep = forward.dropout_mask(args[0], args[1], AttnParams(scale, left, right, dropout_p=P), rng)
    kw = dict(softmax_scale=scale, window_left=left, window_right=right, dropout_p=P, dropout_mask=keep)
    out64, lse64 = reference.attention(*(t.double() for t in args), **kw)
    out16, lse16 = reference.attention(*args, **kw)
    o1, lse1 = o[:1, :, :1].double(), lse[:1, :1].double()
    seen = torch.isfinite(lse64)
    inf_ok = torch.equal(torch.isposinf(lse1), ~seen) and not torch.isnan(lse1).any().item()
    err = (o1 - out64).abs().max().item()
    base = (out16.double() - out64).abs().max().item()
    err_lse = (lse1[seen] - lse64[seen]).abs().max().item() if seen.any() else 0.0
    base_lse = (lse16.double()[seen] - lse64[seen]).abs().max().item() if seen.any() else 0.0
    ok = err <= 2 * base + 1e-4 and err_lse <= 2 * base_lse + 1e-4 and inf_ok and torch.isfinite(o).all().item()
    return ok, (f"f64 err {err:.1e} (torch {base:.1e}), lse {err_lse:.1e} ({base_lse:.1e}), "
                f"rows without keys {int((~seen).sum())}{'' if inf_ok else ' WRONG'}")


def same(a, b) -> str:
    (o1, l1), (o2, l2) = a, b
    if torch.equal(o1, o2) and torch.equal(l1, l2):
        return "bitwise"
    return f"DIFFER: out {(o1.float() - o2.float()).abs().max().item():.1e}, lse equal {torch.equal(l1, l2)}"


def vs_library(q, k, v, o, lse, scale, causal, window, rng) -> str:
    left, right = window_lr(causal, window)
    o2, lse2 = forward.fwd(q, k, v, AttnParams(scale, left, right, dropout_p=P), rng=rng)
    fin = torch.isfinite(lse2)
    return (f"vs library dropout fwd: out {(o.float() - o2.float()).abs().max().item():.1e}, "
            f"lse {(lse[fin] - lse2[fin]).abs().max().item():.1e}, bitwise {torch.equal(o, o2)}")


def decoded_mask(d=128, b=2, nq=256, nk=512, h=4, hk=2, causal=False, **cfg) -> str:
    """The kernel's mask read from its output (q = 0: every visible key weighs 1; v[j] =
    2^(j // d) e_(j % d), fp16: out * l (1 - p) = sum of keep bits), against dropout_mask."""
    p = 0.3
    rng = rng_state(77)
    q = torch.zeros((b, nq, h, d), dtype=torch.float16, device="cuda")
    k = torch.randn((b, nk, hk, d), dtype=torch.float16, device="cuda")
    j = torch.arange(nk, device="cuda")
    v1 = torch.zeros((nk, d), dtype=torch.float16, device="cuda")
    v1[j, j % d] = (2.0 ** (j // d)).half()
    v = v1[None, :, None, :].expand(b, nk, hk, d).contiguous()
    o, _ = forward_gluon.attention_fwd_gluon(q, k, v, 0.1, causal=causal, dropout_p=p, rng=rng, **cfg)
    i = torch.arange(nq, device="cuda")[:, None]
    vis = (j[None, :] <= i + nk - nq) if causal else torch.ones((nq, nk), dtype=torch.bool, device="cuda")
    count = vis.sum(1).float()
    vals = torch.round(o.float().permute(0, 2, 1, 3) * (count * (1.0 - p))[None, None, :, None]).to(torch.int64)
    bits = (vals[..., None] >> torch.arange(nk // d, device="cuda")) & 1
    keep = bits.permute(0, 1, 2, 4, 3).reshape(b, h, nq, nk).bool() & vis
    lib = forward.dropout_mask(q, k, AttnParams(0.1, -1, 0 if causal else -1, dropout_p=p), rng) & vis
    bad = int((keep != lib).sum())
    return "bitwise" if bad == 0 else f"WRONG: {bad} of {keep.numel()} mask bits differ"


def smoke():
    cases = [  # (D, causal, window, B, Nq, Nk, H, Hk, config)
        (128, False, None, 2, 1024, 1024, 8, 2, {}),
        (128, False, None, 2, 1024, 1024, 8, 2, dict(persistent=True, num_programs=7)),
        (128, False, None, 2, 512, 1536, 8, 2, {}),                                       # Nq < Nk
        (128, True, None, 2, 1024, 1024, 8, 2, {}),
        (128, True, None, 2, 1536, 1024, 8, 2, {}),                                       # rows without keys
        (128, True, None, 2, 1024, 1024, 8, 2, dict(persistent=True, num_programs=7)),
        (128, False, None, 2, 1024, 1024, 8, 2, dict(block_n=64, num_stages=4)),
        (128, False, None, 2, 1024, 1024, 8, 2, dict(pingpong=True)),
        (128, False, (256, 0), 2, 1024, 1024, 8, 2, {}),
        (64, False, None, 2, 1024, 1024, 8, 2, dict(persistent=True, num_programs=7)),
        (64, True, None, 2, 1024, 2048, 8, 2, {}),
        (128, False, None, 1, 16384, 16384, 16, 16, dict(persistent=True)),
    ]
    rng = rng_state()
    for d, causal, window, b, nq, nk, h, hk, cfg in cases:
        tag = (f"smoke D={d} {'causal' if causal else 'window=' + str(window) if window else 'plain'} B={b} "
               f"{nq}x{nk} H={h}/{hk} {cfg or 'one block'}")
        try:
            q, k, v = inputs(d, nq, nk, b=b, h=h, hk=hk)
            scale = d ** -0.5
            # the first call of a variant compiles (~5-20 s): a last line "launching" with its
            # clock tells a hang from a slow compile
            print(f"{tag}: launching (compiles first if new) {time.strftime('%H:%M:%S')}", flush=True)
            o, lse = forward_gluon.attention_fwd_gluon(q, k, v, scale, causal=causal, window=window, dropout_p=P,
                                                       rng=rng, **cfg)
            torch.cuda.synchronize()
            ok, text = check_one_head(q, k, v, o, lse, scale, causal, window, rng)
            extra = ", " + vs_library(q, k, v, o, lse, scale, causal, window, rng)
            if cfg.get("persistent"):
                base = forward_gluon.attention_fwd_gluon(q, k, v, scale, causal=causal, window=window, dropout_p=P,
                                                         rng=rng)
                torch.cuda.synchronize()
                extra += f", vs one block {same(base, (o, lse))}"
            print(f"{tag}: {'ok' if ok else 'WRONG'}, {text}{extra}", flush=True)
        except Exception as exc:  # noqa: BLE001  (reported, not fatal)
            print(f"{tag}: {short(exc)}", flush=True)
    for d, causal, cfg in ((128, False, {}), (128, True, {}), (64, False, dict(persistent=True, num_programs=3))):
        tag = f"smoke decoded mask D={d} {'causal' if causal else 'plain'} {cfg or 'one block'}"
        try:
            print(f"{tag}: launching {time.strftime('%H:%M:%S')}", flush=True)
            print(f"{tag}: {decoded_mask(d=d, nk=2 * d if d == 64 else 512, causal=causal, **cfg)}", flush=True)
        except Exception as exc:  # noqa: BLE001
            print(f"{tag}: {short(exc)}", flush=True)


def timed(fn):
    try:
        return graph_time_ms(fn), ""
    except Exception:  # noqa: BLE001  (capture failed: eager instead)
        torch.cuda.synchronize()
        return time_ms(fn, "cuda"), "*"


def case(n, causal, d=128):
    q, k, v = inputs(d, n)
    b, _, h, _ = q.shape
    scale = d ** -0.5
    rng = rng_state()
    flops = attention_flops(b, h, n, n, d, causal)
    params = AttnParams(scale, -1, 0 if causal else -1, dropout_p=P)
    pers = policy.gluon_fwd_persistent(causal)
    calls = {"gluon-drop": forward_gluon.prepare(q, k, v, scale, causal=causal, dropout_p=P, rng=rng)}
    if not causal:
        calls["gluon-drop-pers"] = forward_gluon.prepare(q, k, v, scale, persistent=True, dropout_p=P, rng=rng)
    calls["library-drop"] = lambda: forward.fwd(q, k, v, params, rng=rng)
    calls["gluon-nodrop"] = forward_gluon.prepare(q, k, v, scale, causal=causal, persistent=pers)
    notes = {"gluon-nodrop": f"as routed without dropout ({'PERSISTENT' if pers else 'one block'})",
             "library-drop": "launchers.forward.fwd with the rng (fwd_ws.py plain, fwd.py causal)"}
    for name in [nm for nm in calls if nm.startswith("gluon-drop")]:
        try:
            out = tuple(t.clone() for t in calls[name]())
            torch.cuda.synchronize()
            ok, text = check_one_head(q, k, v, *out, scale, causal, None, rng)
            notes[name] = f"{'ok' if ok else 'WRONG'} ({text}), " + vs_library(q, k, v, *out, scale, causal, None, rng)
            if not ok:
                del calls[name]
        except Exception as exc:  # noqa: BLE001
            notes[name] = short(exc)
            calls.pop(name, None)
    res = {name: [] for name in calls}
    for rnd in range(2):
        for name in (list(calls) if rnd == 0 else list(calls)[::-1]):
            try:
                res[name].append(timed(calls[name]))
            except Exception as exc:  # noqa: BLE001
                notes[name] = notes.get(name, "") + f"; timing: {short(exc)}"
    base = [ms for ms, _ in res.get("gluon-nodrop", [])]

    def fmt(name):
        vals = res[name]
        text = " / ".join(f"{flops / ms / 1e9:.0f}{m}" for ms, m in vals)
        if name != "gluon-nodrop" and len(base) == len(vals) and vals:
            text += " (" + " / ".join(f"{ms / b0:.3f}x" for (ms, _), b0 in zip(vals, base)) + " time of no-dropout)"
        return f"{name} {text}"
    print(f"D={d} {'causal' if causal else 'plain'} p={P} N={n} B={b} H={h} TFLOP/s: "
          + "  ".join(fmt(nm) for nm in res if res[nm]), flush=True)
    for name, note in notes.items():
        print(f"    {name}: {note}", flush=True)


def ab():
    for causal in (False, True):
        for n in (4096, 16384):
            try:
                with torch.no_grad():
                    case(n, causal)
            except Exception as exc:  # noqa: BLE001  (one case failing: print, go on)
                print(f"N={n} causal={causal}: FAILED {short(exc)}", flush=True)
                traceback.print_exc(limit=3)
            torch.cuda.empty_cache()


def _causal_form_child(form, outdir):
    """ab-causal's child process: CAUSAL_DROPOUT_KEEP = form set before any compile (Triton
    refuses a kernel whose global changed after its compile, so each form gets its own
    process), causal 4k / 16k timed against no-dropout, checked against float64, outputs
    saved for the parent's bitwise comparison of the two forms."""
    import triton.experimental.gluon.language as gl
    from flashtriton.kernels import fwd_gluon
    fwd_gluon.CAUSAL_DROPOUT_KEEP = gl.constexpr(form)
    d = 128
    for n in (4096, 16384):
        with torch.no_grad():
            q, k, v = inputs(d, n)
            b, _, h, _ = q.shape
            scale = d ** -0.5
            rng = rng_state()
            flops = attention_flops(b, h, n, n, d, True)
            drop = forward_gluon.prepare(q, k, v, scale, causal=True, dropout_p=P, rng=rng)    # one block a CTA
            nodrop = forward_gluon.prepare(q, k, v, scale, causal=True, persistent=policy.gluon_fwd_persistent(True))
            out = tuple(t.clone() for t in drop())
            torch.cuda.synchronize()
            ok, text = check_one_head(q, k, v, *out, scale, True, None, rng)
            torch.save([t.cpu() for t in out], f"{outdir}/{form}_{n}.pt")
            times = {"drop": [], "nodrop": []}
            for rnd in range(2):
                for name in (("drop", "nodrop") if rnd == 0 else ("nodrop", "drop")):
                    times[name].append(timed(drop if name == "drop" else nodrop))
            ratio = " / ".join(f"{a / c:.3f}x" for (a, _), (c, _) in zip(times["drop"], times["nodrop"]))
            tf = " / ".join(f"{flops / ms / 1e9:.0f}{m}" for ms, m in times["drop"])
            tf0 = " / ".join(f"{flops / ms / 1e9:.0f}{m}" for ms, m in times["nodrop"])
            print(f"ab-causal {form:5s} D={d} N={n} B={b} H={h}: dropout {tf} TFLOP/s, no-dropout {tf0}; "
                  f"time ratio {ratio}; {'ok' if ok else 'WRONG'} ({text}), "
                  + vs_library(q, k, v, *out, scale, True, None, rng), flush=True)
            del q, k, v, out
            torch.cuda.empty_cache()


def ab_causal():
    """Both CAUSAL keep forms (fwd_gluon.CAUSAL_DROPOUT_KEEP "float" / "lean"), one block a
    CTA, causal 4k / 16k, each against the no-dropout causal forward; children in the order
    float, lean, lean, float (each its own process: a form is a module constant read at
    compile time), then the two forms' outputs compared bitwise (they must be: the P operand
    is bitwise the same)."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        for form in ("float", "lean", "lean", "float"):
            r = subprocess.run([sys.executable, __file__, "_causal-form", form, tmp])
            if r.returncode:
                print(f"ab-causal {form}: child exited {r.returncode}", flush=True)
        for n in (4096, 16384):
            try:
                a, b = (torch.load(f"{tmp}/{form}_{n}.pt") for form in ("float", "lean"))
                print(f"ab-causal N={n}: lean vs float outputs {same(tuple(a), tuple(b))}", flush=True)
            except Exception as exc:  # noqa: BLE001
                print(f"ab-causal N={n}: comparison failed {short(exc)}", flush=True)


def main(parts):
    if parts and parts[0] == "_causal-form":
        _causal_form_child(parts[1], parts[2])
        return

    props = torch.cuda.get_device_properties(0)
    print(f"{props.name}, {props.multi_processor_count} SMs; GLUON_FWD_DROPOUT_MIN_N "
          f"{policy.GLUON_FWD_DROPOUT_MIN_N} (empty: not routed), GLUON_FWD_PERSISTENT {policy.GLUON_FWD_PERSISTENT}",
          flush=True)
    if not parts or "smoke" in parts:
        smoke()
    if not parts or "ab" in parts:
        ab()
    if "ab-causal" in parts:
        ab_causal()


if __name__ == "__main__":
    main(sys.argv[1:])
