"""The reference runtime: the NumPy interpreter (:mod:`.interpreter`), its kernels
(:mod:`.kernels`), stripe execution (:mod:`.stripes`), the code it generates for a model's
steps (:mod:`.codegen`) and the event tracer (:mod:`.tracer`)."""
