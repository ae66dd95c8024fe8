"""Workarounds for the Triton interpreter (TRITON_INTERPRET=1), which CI uses to run
the kernels on CPU tensors. Applied only when interpreting; GPU runs never see them.

bf16 tl.dot (Triton 3.6.0, found 2026-11-29): the interpreter stores bfloat16 as raw
uint16 and InterpreterBuilder.create_dot multiplies that storage as integers, so
every bf16 dot returns garbage (errors ~1e10). The fix widens bf16 operands to fp32
first: a product of two bf16 values is exact in fp32, so the result is what the GPU's
bf16 MMA with fp32 accumulation computes.

fp32 -> bf16 casts (Triton 3.6.0, found 2026-12-05 by bench/cpu/s62_kvcache_fuzz.py):
`x.to(tl.bfloat16)` truncates the mantissa in the interpreter (cast_impl passes no
rounding mode to _convert_float: 2,085 of 4,096 random values differ from torch's
conversion), and its round-to-nearest-even mode adds the cut-off bit without ties to
even or a carry into the exponent. On the GPU the cast rounds to nearest even
(cvt.rn.bf16.f32). Symptom: rotary-rotated keys written 1 ulp off the reference's, so
flash_attn_with_kvcache with rotary and appended tokens read lse 2-6x PyTorch's bf16
error under the interpreter. The fix rounds fp32 -> bf16 to nearest even (NaN stays
NaN) in both builder entries.
"""
import numpy as np


def apply():
    from triton import language as tl
    from triton.runtime import interpreter as ti

    original = ti.InterpreterBuilder.create_dot
    if getattr(original, "_flashtriton_fixed", False):
        return

    def widen(h):
        if h.dtype.scalar == tl.bfloat16:
            data = ti._convert_float(h.data, tl.bfloat16, tl.float32, None).view(np.float32)
            return ti.TensorHandle(data, tl.float32)
        return h

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return original(self, widen(a), widen(b), d, input_precision, max_num_imprecise_acc)

    create_dot._flashtriton_fixed = True
    ti.InterpreterBuilder.create_dot = create_dot

    def to_bf16(h):
        u = np.ascontiguousarray(h.data, dtype=np.float32).view(np.uint32).astype(np.uint64)
        r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)        # nearest, ties to even
        nan = (u & 0x7FFFFFFF) > 0x7F800000
        r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)                   # a quiet NaN of the same sign
        return ti.TensorHandle(r.view(np.uint16).reshape(np.shape(h.data)), tl.bfloat16)

    cast, fp_to_fp = ti.InterpreterBuilder.cast_impl, ti.InterpreterBuilder.create_fp_to_fp

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            return to_bf16(src)
        return cast(self, src, dst_type)

    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            return to_bf16(src)
        return fp_to_fp(self, src, dst_type, rounding_mode)

    ti.InterpreterBuilder.cast_impl = cast_impl
    ti.InterpreterBuilder.create_fp_to_fp = create_fp_to_fp
