"""The kernels of teacher-forced self-attention (`model.attention_kernel`), one module each."""
