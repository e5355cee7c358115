"""NumPy reference kernels of the reference runtime, and their registry.

A kernel is ``kernel(op, args) -> outputs``: ``args`` holds the input arrays in their storage
dtype (int8 for quantized tensors; None for an absent optional input) and the kernel returns
one array per output in the output tensor's dtype. Output shapes follow from the inputs
(:func:`infer_shapes` derives them without real data). Look kernels up with
:func:`get_kernel`; CUSTOM ops are keyed by their custom code.

Float kernels compute in float32 as LiteRT does; quantized kernels reproduce TFLite's integer
arithmetic (``MultiplyByQuantizedMultiplier`` and friends, see :mod:`.fixedpoint`), including
the rounding of LiteRT's optimized (SIMD / ruy) kernels where it differs from the reference
kernels, so int8 results are bit-exact with LiteRT's builtin kernels for the ops tested.

Modules: :mod:`.conv` (CONV_2D, DEPTHWISE_CONV_2D), :mod:`.matmul` (FULLY_CONNECTED,
BATCH_MATMUL), :mod:`.elementwise` (ADD, SUB, MUL, DIV, SQUARED_DIFFERENCE, POW, MINIMUM,
MAXIMUM, RSQRT, SQRT, EXP, LOG, NEG, ABS), :mod:`.activation` (RELU, RELU6, RELU_N1_TO_1,
RELU_0_TO_1, LEAKY_RELU, HARD_SWISH, GELU, TANH, LOGISTIC, SOFTMAX), :mod:`.reduce` (MEAN,
SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD, ARG_MAX), :mod:`.pool` (MAX_POOL_2D, AVERAGE_POOL_2D),
:mod:`.shape_ops` (RESHAPE, TRANSPOSE, SQUEEZE, EXPAND_DIMS, CONCATENATION, SPLIT, SPLIT_V,
UNPACK, PACK, PAD, PADV2, STRIDED_SLICE, SLICE, GATHER, CAST), :mod:`.quant` (QUANTIZE,
DEQUANTIZE), :mod:`.norm` (INSTANCE_NORM, custom LAYER_NORM), :mod:`.tensor_ops` (SHAPE,
TILE, BROADCAST_TO, REVERSE_V2, MIRROR_PAD, SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND, SELECT_V2,
GATHER_ND, CUMSUM, ARG_MAX/ARG_MIN, comparisons, logical ops, FLOOR_MOD, ...),
:mod:`.math_ops` (FLOOR, CEIL, ROUND, SIN, COS, LOG, SQUARE, ELU, PRELU, LOG_SOFTMAX),
:mod:`.resample` (TRANSPOSE_CONV, CONV_3D, RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR),
:mod:`.sequence` (UNIDIRECTIONAL_SEQUENCE_LSTM / _RNN). The control-flow ops (WHILE, IF,
CALL, CALL_ONCE) run other subgraphs and are made by the interpreter
(:mod:`toolkit.runtime.control_flow`). Helpers: :mod:`.common`
(options, quantization parameters, fused activations, padding, the per-op cache of prepared
constants), :mod:`.fixedpoint` and :mod:`.blocks` (constant operands for fast ufunc calls).

Kernels prepare what they derive from an op and its constant inputs once and keep it in the
runtime's plan cache (weakly keyed by the op; keyed by its options, tensors and input shapes), so
that repeated calls cost little more than the arithmetic. For models with static shapes the
interpreter goes one step further: :func:`bind_kernel` returns the kernel bound to one op and
one set of input shapes (:mod:`.binders`), with no per-call lookup at all and, for the float
convolutions and pooling, scratch buffers kept between calls; results are the same bit for
bit.
"""

from __future__ import annotations

from toolkit.runtime.kernels import (  # noqa: F401  (importing registers the kernels)
    activation,
    binders,
    conv,
    elementwise,
    math_ops,
    matmul,
    norm,
    onnx_reference,
    pool,
    quant,
    reduce,
    resample,
    sequence,
    shape_ops,
    tensor_ops,
)
from toolkit.runtime.kernels._registry import (
    BINDERS,
    KERNELS,
    Binder,
    Bound,
    Kernel,
    bind_kernel,
    binds,
    get_kernel,
    infer_shapes,
    register,
    run_kernel,
)

__all__ = ["BINDERS", "KERNELS", "Binder", "Bound", "Kernel", "bind_kernel", "binds", "get_kernel",
           "infer_shapes", "register", "run_kernel"]
