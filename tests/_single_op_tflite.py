"""Build one-op TFLite models in tests, run them in LiteRT, and build the matching toolkit op.

The model is written with the circle-schema object API (circle is a superset of the TFLite
schema; the ``TFL3`` file identifier makes it a .tflite file). Inputs without data become
graph inputs; inputs with data become constant buffers.

Example::

    case = SingleOp("ADD", [Spec("a", (2, 3)), Spec("b", (3,))], [Spec("y", (2, 3))],
                    options=add_options())
    want = case.run_litert([a, b])
    got = case.run_kernel([a, b])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import flatbuffers
import numpy as np
from circle_schema.v0_10 import circle as fb

from toolkit.ir import Op, Quantization, Tensor
from toolkit.runtime.kernels import bind_kernel, get_kernel, infer_shapes
from toolkit.runtime.kernels.common import quiet
from toolkit.schema import BUILTIN_CODES, tensor_type_of

__all__ = ["Spec", "SingleOp", "options", "quant"]


def quant(scale: float | Sequence[float], zero_point: int | Sequence[int] = 0,
          axis: int = 0) -> Quantization:
    """Shorthand for :meth:`Quantization.make`."""
    return Quantization.make(scale, zero_point, axis)


@dataclass
class Spec:
    """A tensor of the test model: name, shape, dtype, optional constant data and quant."""

    name: str
    shape: tuple[int, ...] | None
    dtype: Any = np.float32
    data: np.ndarray | None = None
    quant: Quantization | None = None

    @classmethod
    def const(cls, name: str, data: np.ndarray, q: Quantization | None = None) -> Spec:
        """A constant tensor holding ``data``."""
        data = np.ascontiguousarray(data)
        return cls(name, tuple(data.shape), data.dtype, data, q)


def options(name: str, **fields: Any) -> Any:
    """Build a builtin options object, e.g. ``options("Conv2DOptions", padding=1)``."""
    mod = getattr(fb, name)
    obj = getattr(mod, name + "T")()
    for k, v in fields.items():
        if not hasattr(obj, k):
            raise AttributeError(f"{name}T has no field {k!r}")
        setattr(obj, k, v)
    return obj


def _tensor_t(spec: Spec, buffer: int) -> Any:
    t = fb.Tensor.TensorT()
    t.name = spec.name
    t.shape = list(spec.shape or ())
    t.type = tensor_type_of(spec.dtype)
    t.buffer = buffer
    if spec.quant is not None:
        q = fb.QuantizationParameters.QuantizationParametersT()
        q.scale = [float(s) for s in spec.quant.scale]
        q.zeroPoint = [int(z) for z in spec.quant.zero_point]
        q.quantizedDimension = int(spec.quant.quantized_dimension)
        t.quantization = q
    return t


class SingleOp:
    """A one-op model: its .tflite bytes, a LiteRT runner and the toolkit ``Op``."""

    def __init__(self, op_type: str, inputs: Sequence[Spec | None], outputs: Sequence[Spec],
                 options: Any = None, *, custom_code: str | None = None,
                 custom_options: bytes | None = None) -> None:
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.feeds = [s for s in self.inputs if s is not None and s.data is None]
        self.op = self._toolkit_op(op_type, options, custom_code, custom_options)
        if any(s.shape is None for s in self.outputs):
            # output shapes left open are derived from the inputs by the kernel
            shapes = infer_shapes(self.op, [None if s is None else s.shape
                                            for s in self.inputs])
            for s, shape in zip(self.outputs, shapes, strict=True):
                s.shape = s.shape if s.shape is not None else shape
            self.op = self._toolkit_op(op_type, options, custom_code, custom_options)
        self.model = None if op_type == "CUSTOM" or op_type not in BUILTIN_CODES or \
            BUILTIN_CODES[op_type] < 0 else self._flatbuffer(op_type, options)

    # ------------------------------------------------------------ toolkit side
    def _toolkit_op(self, op_type: str, opts: Any, custom_code: str | None,
                    custom_options: bytes | None) -> Op:
        def tensor(s: Spec) -> Tensor:
            data = None if s.data is None else np.asarray(s.data, dtype=s.dtype)
            return Tensor(s.name, s.shape or (), tensor_type_of(s.dtype), data=data,
                          quant=s.quant)

        ins = [None if s is None else tensor(s) for s in self.inputs]
        outs = [tensor(s) for s in self.outputs]
        return Op(op_type, ins, outs, opts, custom_code=custom_code,
                  custom_options=custom_options)

    def run_kernel(self, feeds: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run the toolkit kernel; ``feeds`` are the non-constant inputs in order."""
        it = iter(feeds)
        args = []
        for s in self.inputs:
            if s is None:
                args.append(None)
            elif s.data is not None:
                args.append(np.asarray(s.data, dtype=s.dtype))
            else:
                args.append(np.asarray(next(it), dtype=s.dtype))
        got = get_kernel(self.op)(self.op, args)
        # the kernel bound to these inputs (the interpreter's fast path) gives the same
        # arrays bit for bit, also when called again (its scratch buffers are reused)
        bound = bind_kernel(self.op, args)
        if bound is not None:
            for _ in range(2):
                again = quiet(bound, *args)
                assert again.dtype == got[0].dtype and again.shape == got[0].shape
                np.testing.assert_array_equal(again, got[0], strict=True)
        return got

    # ------------------------------------------------------------ LiteRT side
    def _flatbuffer(self, op_type: str, opts: Any) -> bytes:
        code = BUILTIN_CODES[op_type]
        model = fb.Model.ModelT()
        model.version = 3
        model.description = "single op test model"
        buffers = [fb.Buffer.BufferT()]
        tensors: list[Any] = []
        index: dict[int, int] = {}

        def add(spec: Spec) -> int:
            if id(spec) in index:
                return index[id(spec)]
            buf = 0
            if spec.data is not None:
                b = fb.Buffer.BufferT()
                raw = np.ascontiguousarray(np.asarray(spec.data, dtype=spec.dtype))
                b.data = np.frombuffer(raw.tobytes(), dtype=np.uint8)
                buffers.append(b)
                buf = len(buffers) - 1
            tensors.append(_tensor_t(spec, buf))
            index[id(spec)] = len(tensors) - 1
            return index[id(spec)]

        in_idx = [-1 if s is None else add(s) for s in self.inputs]
        out_idx = [add(s) for s in self.outputs]
        oc = fb.OperatorCode.OperatorCodeT()
        oc.builtinCode = code
        oc.deprecatedBuiltinCode = min(code, 127)
        oc.version = 1
        operator = fb.Operator.OperatorT()
        operator.opcodeIndex = 0
        operator.inputs = in_idx
        operator.outputs = out_idx
        if opts is not None:
            name = type(opts).__name__[:-1]
            operator.builtinOptionsType = getattr(fb.BuiltinOptions.BuiltinOptions, name)
            operator.builtinOptions = opts
        sg = fb.SubGraph.SubGraphT()
        sg.tensors = tensors
        sg.inputs = [index[id(s)] for s in self.feeds]
        sg.outputs = out_idx
        sg.operators = [operator]
        sg.name = "main"
        model.subgraphs = [sg]
        model.operatorCodes = [oc]
        model.buffers = buffers
        b = flatbuffers.Builder(1024)
        b.Finish(model.Pack(b), file_identifier=b"TFL3")
        return bytes(b.Output())

    def run_litert(self, feeds: Sequence[np.ndarray], *, delegates: bool = False
                   ) -> list[np.ndarray]:
        """Run the model in LiteRT with its builtin kernels (``delegates``: allow XNNPACK)."""
        from ai_edge_litert import interpreter as litert

        if self.model is None:
            raise ValueError("this op has no LiteRT model")
        resolver = (litert.OpResolverType.AUTO if delegates
                    else litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        interp = litert.Interpreter(model_content=self.model, num_threads=1,
                                    experimental_op_resolver_type=resolver)
        interp.allocate_tensors()
        for d, x in zip(interp.get_input_details(), feeds, strict=True):
            interp.set_tensor(d["index"], np.asarray(x, dtype=d["dtype"]))
        interp.invoke()
        return [np.array(interp.get_tensor(d["index"])) for d in interp.get_output_details()]
