"""Session 38: OWN_TILES (kernels/fwd_gluon.py _fwd_consume_own; launchers.policy.GLUON_FWD_CAUSAL_OWN_TILES):
the causal one-block 2-consumer Gluon forward with each 64-row consumer computing only the key tiles its
rows reach. At D = 256 (BLOCK_M 128, BLOCK_N 64) warpgroup 0 masks a whole tile to p = 0 in every block
today. A/B against the routed kernel (own0), FA2 (SDPA FLASH_ATTENTION) and cuDNN, issue 4's D = 256
causal cells (16k tokens, H = 8: B = 16k / N), bf16 and fp16, kernel-only CUDA-graph replays, two rounds
(the second reversed). Before timing: own1's outputs BITWISE own0's, own0 within the float64 criterion.

    PYTHONPATH=src timeout 300 python bench/gpu/s38_own_tiles_ab.py      # S38_NS=512,1024 S38_DTYPES=bf16

PREDICTION (before the run). Per head at N = 512 the block's consumers compute 2 x (2p + 2) 64-key tiles
for p = 0..3 (40), of which warpgroup 0's last tile is wholly masked in each block (4): 10% of the S and
P V wgmmas. The CTA's time is the tensor pipe's work plus its fixed cost (Q load, epilogue: ~40% of a
CTA at 5 tiles a block), so ~+5-8% at 512 (303 -> 320-330 TFLOP/s; 1.5x FA2 needs 312), +3-4% at 1k,
+1.5-2.5% at 2k, ~+1% at 4k (the skipped share halves each doubling).
Routing rule: GLUON_FWD_CAUSAL_OWN_TILES gets 256 if own1 >= 1% faster than own0 in both rounds at 512
and 1k in bf16 and fp16, and no worse than -0.5% in either round at 2k and 4k.
"""
import os

import torch

from flashtriton.bench import common, providers
from flashtriton.launchers import forward_gluon

D, H, TOKENS = 256, 8, 16384
NS = [int(x) for x in os.environ.get("S38_NS", "512,1024,2048,4096").split(",")]
DTYPES = [{"bf16": torch.bfloat16, "fp16": torch.float16}[x] for x in os.environ.get("S38_DTYPES", "bf16,fp16")
          .split(",")]


def case(n, dtype):
    b = TOKENS // n
    torch.manual_seed(n)
    q, k, v = (torch.randn(b, n, H, D, device="cuda", dtype=dtype) for _ in range(3))
    scale = D ** -0.5
    label = f"D={D} causal N={n} B={b} {str(dtype)[6:]}"
    calls = {"own0": forward_gluon.prepare(q, k, v, scale, causal=True),
             "own1": forward_gluon.prepare(q, k, v, scale, causal=True, own_tiles=True)}
    o0, o1 = ([t.clone() for t in calls[x]()] for x in ("own0", "own1"))
    ok, text = common.head0_fwd_check(q, k, v, *o0, softmax_scale=scale, window_left=-1, window_right=0)
    same = common.same_outputs(o0, o1)
    print(f"{label}: own0 {text} {'ok' if ok else 'WRONG'}; own1 {same} against own0", flush=True)
    if same != "bitwise":
        calls.pop("own1")
    gp = providers.gpu_providers(include_flex=False)
    for name, key in (("fa2", "sdpa-flash (FA2 CUDA)"), ("cudnn", "sdpa-cudnn")):
        calls[name] = lambda fn=gp[key]: fn(q, k, v, True)
    flops = common.attention_flops(b, H, n, n, D, True)
    tf = common.timing_rounds(calls, {x: flops for x in calls}, label)
    gain = ""
    if "own1" in tf:
        gain = " / ".join(f"{100 * (a / b_ - 1):+.1f}%" for a, b_ in zip(tf["own1"], tf["own0"]))
    fa2 = max(tf["fa2"]) if "fa2" in tf else float("nan")
    print(f"| {n} | {str(dtype)[6:]} | {common.ratio_cells(tf, 'own0')} | own1 / own0 a round: {gain} | best / FA2: "
          + ", ".join(f"{x} {max(t) / fa2:.3f}x" for x, t in tf.items()) + " |", flush=True)


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    for dtype in DTYPES:
        for n in NS:
            try:
                case(n, dtype)
            except Exception as exc:  # noqa: BLE001  (reported; the other cases run)
                print(f"N={n} {dtype}: {common.short_error(exc)}", flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
