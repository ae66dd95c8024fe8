"""Layer 2: host launchers of the prefill kernels: allocation, strides, grid, tiles.

Inputs arrive validated (flashtriton.validate): dtypes, shapes, head dims and the
unit inner stride are already checked. What is left here is what only the launch
needs: tensor-descriptor alignment, the varlen program map and the tile choice.

Dense tensors are (B, N, H, D); variable-length ones are (total, H, D) with int32
cumulative offsets cu_seqlens (B + 1,). The lse is (B, H, Nq) fp32 for dense inputs
and (H, total_q) for variable-length ones, as in flash-attn.

This module only re-exports the public entry points. The code lives in:
- launchers/common.py: AttnParams, Varlen, interpreting, block_d, the host-made TMA
  descriptors and their policy (host_descriptors), the varlen program maps
  (_cached_map, _cu_blocks, _heaviest_first, _ws_varlen_maps), the dropout key table,
  the kernels' common scalars and the tile choice (_tile);
- launchers/policy.py: the warp-specialization rules (warp_spec_mode, warp_spec_*,
  FWD_SHORT_ON_FWD_PY, FLASHTRITON_WARP_SPEC) and tile tables (WARP_SPEC_TILES,
  BWD_WARP_SPEC_TILES, ...);
- launchers/forward.py: fwd, FWD_ROWS_FIRST, the warp-specialized forwards, dropout_mask;
- launchers/backward.py: bwd, DKDV_QUERY_ROWS / dkdv_key_rows, the warp-specialized
  backwards.
Patch a tunable or function (tests' monkeypatch) in the module that reads it, not here.
"""
from .backward import bwd
from .common import AttnParams, Varlen, block_d
from .forward import dropout_mask, fwd

__all__ = ["AttnParams", "Varlen", "block_d", "bwd", "dropout_mask", "fwd"]
