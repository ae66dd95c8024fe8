"""Workarounds for the Triton interpreter (TRITON_INTERPRET=1), which CI uses to run
the kernels on CPU tensors. Applied only when interpreting; GPU runs never see them.

bf16 tl.dot (Triton 3.6.0, found 2026-11-29): the interpreter stores bfloat16 as raw
uint16 and InterpreterBuilder.create_dot multiplies that storage as integers, so
every bf16 dot returns garbage (errors ~1e10). The fix widens bf16 operands to fp32
first: a product of two bf16 values is exact in fp32, so the result is what the GPU's
bf16 MMA with fp32 accumulation computes.
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
