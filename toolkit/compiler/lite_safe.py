"""Make a model safe to save as .tflite: split out the fused activations LiteRT ignores.

LiteRT applies a fused TANH only in its recurrent kernels (LSTM, RNN, SVDF); on ADD, MUL,
CONV_2D... it ignores it, so a model whose passes fused a TANH into such an op would run
without the TANH in LiteRT. :func:`~toolkit.formats.flatbuffer_write.write_model` refuses to
write one as .tflite; :func:`unfuse_ignored_activations` returns a copy where each such op
writes its value without activation and a separate TANH op (with the same origins) applies
it, which LiteRT runs as intended.
"""

from __future__ import annotations

from toolkit.compiler.copy_model import copy_model
from toolkit.formats.flatbuffer_write import ignored_activations, ignores_activation
from toolkit.ir import Model
from toolkit.schema import ACTIVATION_CODES

__all__ = ["unfuse_ignored_activations", "ignored_activations", "ignores_activation"]


def unfuse_ignored_activations(model: Model) -> Model:
    """Return a copy of ``model`` in which every fused activation LiteRT ignores (see
    :func:`~toolkit.formats.flatbuffer_write.ignored_activations`) is a separate op with the
    origins of the op it was fused into; ``model`` itself is not changed."""
    if not ignored_activations(model):
        return model
    work = copy_model(model)
    tanh = ACTIVATION_CODES["TANH"]
    for si, g in enumerate(work.subgraphs):
        for op in list(g.ops):
            if not ignores_activation(op):
                continue
            out = op.outputs[0]
            opts = op.options
            opts.fusedActivationFunction = ACTIVATION_CODES["NONE"]
            op.options = opts
            post = g.add_tensor(g.unique_name(f"{out.name}/tanh"), out.shape,
                                type_code=out.type_code, quant=out.quant,
                                shape_signature=out.shape_signature)
            act = g.add_op("TANH", [out], [post], origins=op.origins, after=op)
            was_output = out in g.outputs
            g.replace_all_uses_with(out, post)
            g.set_input(act, 0, out)
            if was_output:
                for sd in work.signature_defs:
                    if sd.subgraph_index == si:
                        sd.outputs = [(n, post if t is out else t) for n, t in sd.outputs]
            assert op.activation != tanh
    return work
