"""Layer 2: host launchers. They allocate outputs, compute strides and grids, choose
tiles, and launch the kernels of flashtriton.kernels on validated inputs."""
