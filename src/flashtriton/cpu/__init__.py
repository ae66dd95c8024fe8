"""The `cpu` backend: FlashAttention-2's algorithm on CPUs, driven by PyTorch ops.

Interface (the same as flashtriton.triton_backend and flashtriton.reference_backend):
  fwd(q, k, v, params, alibi, rng, varlen) -> (out, lse)   (lse relative to the ALiBi anchor: alibi_anchor.py)
  bwd(dout, q, k, v, out, lse, params, alibi, rng, varlen) -> (dq, dk, dv)
  dropout_mask(q, k, params, rng, varlen) -> keep mask (B, H, Nq, Nk) bool
  kvcache_fwd(q, k_cache, v_cache, k_new, v_new, ...) -> (out, lse)   (flash_attn_with_kvcache)
  fwd_paged(q, k_cache, v_cache, block_table, params, alibi, varlen) -> (out, lse)
      (flash_attn_varlen_func with block_table: the used pages gathered into the varlen
      layout, O(total_k) copies, then fwd; the forward's O(N^2) work dominates)

Files:
  engine.py    the float32 matmul (oneDNN through torch, ~2x torch.mm's MKL on AMD)
  config.py    tile sizes and precision choices, with the measurements behind them
  tiles.py     causal / window tile skipping, masks of partial tiles, ALiBi tiles
  layout.py    per-sequence views and the per-head float32 copies the loops use
  forward.py   online softmax over key tiles (exp2, lazy rescaling, divide once):
               the torch-ops forward, for what the compiled one does not take
  native_prefill.py  the compiled forward (C, AVX-512 / AVX512-BF16, built on first
               use like native.py): the default forward for bf16 / float32; bf16 on
               Intel AMX tiles where the CPU has them (config.FWD_AMX)
  backward.py  recomputation on transposed tiles, dQ / dK / dV, no atomics; heads on
               one Python thread per core (single-threaded ops), lse / delta folded
               into the products
  native_bwd.py  the backward's compiled elementwise pass (P and dS of a tile in one
               pass, C / AVX-512, built on first use like native.py; torch ops without it)
  native_backward.py  the compiled float32 backward (C / AVX-512, session 42): the default
               backward for float32 math without softcap / ALiBi / dropout
               (config.BWD_PATH, FLASHTRITON_CPU_BACKWARD)
  dropout.py   counter-based keep mask: any tile drawn on its own, fwd == bwd
  decode.py    split-KV decoding over a contiguous or paged cache, append, rotary
  native.py    the compiled C decode kernel (built with the system compiler on first
               use, cached on disk): decode's default path for bf16 / float32 caches
  rotary.py    rotary embedding (GPT-J and GPT-NeoX pairings)

Precision: every forward score product (S = q k^T) is an exact float32 product of the
inputs (bf16 / fp16 convert exactly to float32, so this is "input precision, float32
accumulation"); for bf16 inputs the products that accumulate over tiles (P @ V, dV,
dK, dQ) run as bf16 matmuls on P / dS rounded to bf16, as flash-attn does on GPUs.
The bf16 backward runs its two score products as bf16 matmuls too (AMX), S^T and
dP^T - delta each rounded to bf16 once (torch has no bf16 matmul with a float32 result
on CPU; backward.py's docstring has the details and the measured errors); float32 /
fp16 backward products stay float32 (the compiled backward: float32 FMAs throughout).
The compiled forward (native_prefill.py, the
default for bf16 / float32) computes bf16 scores by vdpbf16ps (exact bf16 products,
float32 sums) and P @ V on P rounded to bf16 with float32 accumulation; float32
stays float32. Decoding (native.py, the default) keeps the
accumulators in float32; float32 caches take float32 FMAs throughout, bf16 caches on
CPUs with AVX512-BF16 where bf16 products are fast (config) take vdpbf16ps for the scores
(exact products of the bf16 q and K, float32 sums) and for P @ V on P rounded to bf16
(native.py's docstring); the torch-ops
decode from a bf16 KV cache (decode._attend_direct, FLASHTRITON_CPU_DECODE=ops)
multiplies q and the cache in bf16 with bf16 scores (as the same-dtype PyTorch math
does): a float32 score product would need a float32 copy of every cache byte. Nothing
materialises N x N; see bench/NOTES.md ("CPU backend") for the design measurements.
"""
from flashtriton import alibi_anchor, paged
from flashtriton.launchers.prefill import AttnParams, Varlen

from .backward import bwd  # noqa: F401
from .decode import kvcache_fwd  # noqa: F401
from .dropout import Dropout
from .forward import fwd  # noqa: F401


def fwd_paged(q, k_cache, v_cache, block_table, params: AttnParams, alibi, varlen: Varlen):
    k, v = paged.gather_kv(k_cache, v_cache, block_table, varlen.cu_seqlens_k)
    out, lse = fwd(q, k, v, params, alibi, None, varlen)
    # the paged op is forward-only and returns flash-attn's lse, not fwd's anchored one
    return out, alibi_anchor.to_public(lse, alibi, 0, 0, (varlen.cu_seqlens_q, varlen.cu_seqlens_k))


def dropout_mask(q, k, params: AttnParams, rng, varlen: Varlen | None = None):
    """The keep mask (B, H, Nq, Nk) bool (varlen: (B, H, max_seqlen_q, max_seqlen_k))
    that fwd and bwd draw for this rng state."""
    nheads = q.shape[-2]
    if varlen is None:
        batch, mq, mk = q.shape[0], q.shape[1], k.shape[1]
    else:
        batch, mq, mk = varlen.cu_seqlens_q.numel() - 1, varlen.max_seqlen_q, varlen.max_seqlen_k
    return Dropout(params.dropout_p, rng, nheads, mq, mk).full_mask(batch)
