"""The compiler passes, one module each, and their registry.

=================================  ========  ====================================================
pass                               origins   what it does
=================================  ========  ====================================================
fold_constants                     remove    computes ops whose inputs are all constants
remove_noop_reshape                remove    drops RESHAPE to the same shape
cancel_transposes                  remove    drops TRANSPOSE pairs that cancel, identity ones
cancel_quantize_pairs              remove    drops DEQUANTIZE→QUANTIZE round trips, identity
                                             requantizations
fuse_instance_norm                 fuse      instance-norm subgraph → circle INSTANCE_NORM
fuse_layer_norm                    fuse      layer-norm subgraph → CUSTOM ``LAYER_NORM``
strength_reduce                    replace   POW(x, ±0.5 / 2) → SQRT / RSQRT / MUL; DIV by a
                                             power of two → MUL
fold_batch_norm                    absorb    constant MUL (+ADD) → weights and bias of
                                             CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED
fuse_bias_add                      absorb    constant ADD/SUB → bias of the same
fuse_activation                    absorb    RELU / RELU6 / RELU_N1_TO_1 / TANH → producer
eliminate_common_subexpressions    absorb    merges identical ops into the first
eliminate_dead_code                remove    drops ops nothing reads
=================================  ========  ====================================================
"""

from __future__ import annotations

from toolkit.compiler.passes.base import GraphPass, PassResult
from toolkit.compiler.passes.cancel_quantize_pairs import CancelQuantizePairs
from toolkit.compiler.passes.cancel_transposes import CancelTransposes
from toolkit.compiler.passes.eliminate_common_subexpressions import EliminateCommonSubexpressions
from toolkit.compiler.passes.eliminate_dead_code import EliminateDeadCode
from toolkit.compiler.passes.fold_batch_norm import FoldBatchNorm
from toolkit.compiler.passes.fold_constants import FoldConstants
from toolkit.compiler.passes.fuse_activation import FuseActivation
from toolkit.compiler.passes.fuse_bias_add import FuseBiasAdd
from toolkit.compiler.passes.fuse_instance_norm import FuseInstanceNorm
from toolkit.compiler.passes.fuse_layer_norm import FuseLayerNorm
from toolkit.compiler.passes.remove_noop_reshape import RemoveNoopReshape
from toolkit.compiler.passes.strength_reduce import StrengthReduce

__all__ = [
    "GraphPass", "PassResult", "PASSES", "DEFAULT_PASSES", "CancelQuantizePairs",
    "CancelTransposes", "EliminateCommonSubexpressions", "EliminateDeadCode", "FoldBatchNorm",
    "FoldConstants", "FuseActivation", "FuseBiasAdd", "FuseInstanceNorm", "FuseLayerNorm",
    "RemoveNoopReshape", "StrengthReduce",
]

#: Every pass by name.
PASSES: dict[str, type[GraphPass]] = {p.name: p for p in (
    FoldConstants, RemoveNoopReshape, CancelTransposes, CancelQuantizePairs, FuseInstanceNorm,
    FuseLayerNorm, StrengthReduce, FoldBatchNorm, FuseBiasAdd, FuseActivation,
    EliminateCommonSubexpressions, EliminateDeadCode,
)}

#: The passes ``compile`` runs by default, in order. Normalisation fusions come before the
#: activation and common-subexpression passes, which could otherwise break their patterns.
DEFAULT_PASSES: tuple[str, ...] = tuple(PASSES)
