"""The `triton` backend: the Triton launchers behind the backend interface.

Interface (shared by flashtriton.cpu and flashtriton.reference_backend):
  fwd(q, k, v, params, alibi, rng, varlen) -> (out, lse)   (lse relative to the ALiBi anchor: alibi_anchor.py)
  bwd(dout, q, k, v, out, lse, params, alibi, rng, varlen) -> (dq, dk, dv)
  dropout_mask(q, k, params, rng, varlen) -> keep mask (B, H, Nq, Nk) bool
  fwd_paged(q, k_cache, v_cache, block_table, params, alibi, varlen) -> (out, lse)
      (flash_attn_varlen_func with block_table: flashtriton.paged)
"""
from .launchers.prefill import bwd, dropout_mask, fwd  # noqa: F401
from .launchers.decode import kvcache_fwd  # noqa: E402,F401  (flash_attn_with_kvcache)
from .launchers.forward_paged import fwd_paged  # noqa: E402,F401  (varlen with block_table)
