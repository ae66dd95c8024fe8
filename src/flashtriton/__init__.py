"""flashtriton: exact attention for PyTorch in Triton, with flash-attn 2.x's API.

    from flashtriton import flash_attn_func
    out = flash_attn_func(q, k, v, causal=True)     # q, k, v: (batch, seqlen, nheads, headdim)

Layers: kernels/ (@triton.jit) -> launchers/ (host side) -> ops.py (torch.library
ops and autograd) -> api.py (this API). backends.py chooses the backend.
"""
from .api import (flash_attn_func, flash_attn_kvpacked_func, flash_attn_qkvpacked_func, flash_attn_varlen_func,
                  flash_attn_varlen_kvpacked_func, flash_attn_varlen_qkvpacked_func)
from .backends import use_backend
from .kvcache import flash_attn_with_kvcache
from .merge import merge_attention_states

__version__ = "0.1.0"

__all__ = [
    "flash_attn_func", "flash_attn_qkvpacked_func", "flash_attn_kvpacked_func",
    "flash_attn_varlen_func", "flash_attn_varlen_qkvpacked_func", "flash_attn_varlen_kvpacked_func",
    "use_backend", "__version__",
    "flash_attn_with_kvcache", "merge_attention_states",
]
