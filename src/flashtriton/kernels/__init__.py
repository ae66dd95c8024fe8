"""Layer 1: the @triton.jit kernels. They never see unvalidated input: the launchers
in flashtriton.launchers check shapes, strides and dtypes before any launch."""
