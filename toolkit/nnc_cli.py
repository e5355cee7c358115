"""``toolkit nnc``: the command line of ONE's nnc (NN compiler) on the toolkit's pieces.

    toolkit nnc --caffe -m deploy.prototxt --weights net.caffemodel --target interpreter \\
        --input-model-data input.bin --res-filename out.npz
    toolkit nnc --tflite -m model.tflite --target cpp -d artifact/ -o nnmodel

The options are nnc's (``--caffe``/``--tflite``, ``--target``, ``-m/--nnmodel``,
``-o/--output``, ``-d/--output-dir`` and the interpreter options ``--input-model-data``,
``--input-node``, ``--output-node``, ``--res-filename``), plus ``--weights`` for a Caffe
deploy prototxt whose weights sit in a separate ``.caffemodel`` (nnc wanted both in one file).

* ``--target interpreter`` runs the reference runtime. ``--input-model-data`` is a file of
  little-endian float32 values in the input's (Caffe: N, C, H, W) order, as nnc reads it, or
  a ``.npy`` array. The results go to ``--res-filename`` as a NumPy ``.npz`` archive: one
  float32 array per output node, keyed by the node's name, in the model's shapes (nnc wrote
  HDF5; the archive holds the same arrays and needs only NumPy to read).
* ``--target cpp`` (nnc's ``x86-c++`` is accepted too) writes the native C++ artifact with
  ``toolkit.generator.codegen(model, output_dir, name)`` when that backend is installed.
"""

from __future__ import annotations

import argparse
import importlib
import io
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toolkit.errors import ToolkitError
from toolkit.ir import Model

__all__ = ["main_nnc", "load_nn_model", "run_interpreter", "parser"]

_TARGETS = ("interpreter", "cpp", "x86-c++")


def parser() -> argparse.ArgumentParser:
    """The argument parser of ``toolkit nnc`` (nnc's options)."""
    from toolkit.util.cliargs import ToolkitParser

    p = ToolkitParser(
        prog="toolkit nnc", usage="toolkit nnc OPTIONS",
        description="Compile or interpret a neural network model, with nnc's options.",
        epilog="Results of --target interpreter are a NumPy .npz archive (one float32 array "
               "per output node). A bad input prints 'error: ...' and exits with status 2.")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--caffe", action="store_true",
                      help="treat input file as Caffe model (.prototxt or .caffemodel; "
                           "default: by the file's extension)")
    kind.add_argument("--tflite", action="store_true",
                      help="treat input file as TensorFlow Lite model (.tflite or .circle; "
                           "default: by the file's extension)")
    p.add_argument("--target", required=True, choices=_TARGETS, metavar="TARGET",
                   help="select target language to emit for given architecture. Valid values "
                        "are 'cpp' (also 'x86-c++'), 'interpreter'")
    p.add_argument("-m", "--nnmodel", required=True, type=Path, metavar="FILE",
                   help="specify input file with NN model")
    p.add_argument("--weights", type=Path, metavar="FILE",
                   help="Caffe only: .caffemodel with the weights of a deploy .prototxt")
    p.add_argument("-o", "--output", metavar="NAME",
                   help="specify name for output files (default: the model file's stem)")
    p.add_argument("-d", "--output-dir", type=Path, default=Path("."), metavar="DIR",
                   help="specify directory for output files (default: the current folder)")
    p.add_argument("--input-model-data", type=Path, metavar="FILE",
                   help="interpreter option: specify file with neural network input data. "
                        "This file contains array of floats in binary form (or a .npy)")
    p.add_argument("--input-node", metavar="NAME",
                   help="interpreter option: set input node in Computational Graph")
    p.add_argument("--output-node", action="append", metavar="NAME",
                   help="interpreter option: set output node in Computational Graph "
                        "(repeat for several; default: every output)")
    p.add_argument("--res-filename", type=Path, metavar="FILE",
                   help="interpreter option: file for result tensor (.npz; default: "
                        "OUTPUT_DIR/OUTPUT.npz)")
    p.add_argument("--debug", action="store_true", help="turn debugging on (log messages)")
    p.add_argument("--debug-area", metavar="AREAS",
                   help="if specified, debug messages are shown only in given areas "
                        "(comma-separated toolkit packages, e.g. importers,runtime)")
    return p


def load_nn_model(path: Path, *, caffe: bool | None = None,
                  weights: Path | None = None) -> Model:
    """Load the model of ``-m``: Caffe when ``caffe`` (or, when None, by extension), else a
    .tflite/.circle file. Returns the toolkit Model."""
    if caffe is None:
        caffe = path.suffix.lower() in (".prototxt", ".caffemodel", ".pbtxt")
    if caffe:
        from toolkit.importers.caffe import load_caffe

        return load_caffe(path, weights=weights)
    if weights is not None:
        raise ToolkitError("--weights is for Caffe models", where="--weights",
                           fix="pass --caffe, or drop --weights")
    from toolkit.formats.flatbuffer_read import load

    return load(path)


def _read_input(path: Path, shape: tuple[int, ...], name: str) -> np.ndarray:
    try:
        if path.suffix.lower() == ".npy":
            arr = np.load(path, allow_pickle=False)
            data = np.asarray(arr, dtype=np.float32).ravel()
        else:
            data = np.fromfile(path, dtype="<f4")
    except (OSError, ValueError) as e:
        raise ToolkitError(f"cannot read input data ({e})", where=str(path),
                           fix="pass a file of float32 values or a .npy array") from None
    need = int(np.prod(shape, dtype=np.int64))
    if data.size != need:
        raise ToolkitError(f"holds {data.size} float(s); input {name!r} of shape "
                           f"{list(shape)} needs {need}", where=str(path),
                           fix="write the input as little-endian float32 in N, C, H, W order")
    return data.reshape(shape).astype(np.float32)


def run_interpreter(model: Model, input_data: Path, *, input_node: str | None = None,
                    output_nodes: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """Run ``model`` with the reference runtime on the float data of ``input_data``; return
    the graph outputs named ``output_nodes`` (default: all of them) by name, as float32."""
    from toolkit.runtime.interpreter import run_model

    g = model.graph
    names = [t.name for t in g.inputs]
    if input_node is None:
        if len(names) != 1:
            raise ToolkitError(f"the model has {len(names)} inputs ({', '.join(names)})",
                               where="--input-node", fix="name the input to feed")
        input_node = names[0]
    if input_node not in names:
        raise ToolkitError(f"no input node {input_node!r}", where="--input-node",
                           fix=f"inputs are: {', '.join(names)}")
    if len(names) != 1:
        raise ToolkitError(f"the model has {len(names)} inputs; the interpreter target feeds "
                           "one", where="--input-model-data",
                           fix=("run this model with `toolkit run MODEL --inputs X.npz` (one "
                                "array per input)"))
    t = g.inputs[0]
    x = _read_input(input_data, t.shape, input_node)
    outs = [o.name for o in g.outputs]
    wanted = list(output_nodes or outs)
    for w in wanted:
        if w not in outs:
            raise ToolkitError(f"no output node {w!r}", where="--output-node",
                               fix=f"outputs are: {', '.join(outs)}")
    res = run_model(model, {input_node: x}).outputs
    return {w: np.asarray(res[w], dtype=np.float32) for w in wanted}


def _write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    from toolkit.util.atomic import atomic_write

    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    atomic_write(path, buf.getvalue())


def _codegen(model: Model, out_dir: Path, name: str) -> Any:
    try:
        codegen = importlib.import_module("toolkit.generator")
    except ModuleNotFoundError as e:
        if e.name not in ("toolkit.generator", "toolkit"):
            raise
        raise ToolkitError("the native backend is not available (no toolkit.generator)",
                           where="--target cpp", fix="use --target interpreter") from None
    return codegen.codegen(model, out_dir, name)


def main_nnc(argv: Sequence[str]) -> int:
    """``toolkit nnc OPTIONS``: returns the exit status (ToolkitError propagates)."""
    a = parser().parse_args(list(argv))
    if a.debug_area:
        logging.basicConfig()
        for area in a.debug_area.split(","):
            logging.getLogger(f"toolkit.{area.strip()}").setLevel(logging.DEBUG)
    elif a.debug:
        logging.basicConfig(level=logging.DEBUG)
    caffe = True if a.caffe else False if a.tflite else None
    model = load_nn_model(a.nnmodel, caffe=caffe, weights=a.weights)
    name = a.output or a.nnmodel.stem
    if a.target == "interpreter":
        if a.input_model_data is None:
            raise ToolkitError("the interpreter target needs input data",
                               where="--input-model-data",
                               fix="pass --input-model-data FILE (float32 values)")
        res = run_interpreter(model, a.input_model_data, input_node=a.input_node,
                              output_nodes=a.output_node)
        path = a.res_filename or a.output_dir / f"{name}.npz"
        _write_npz(path, res)
        for k, v in res.items():
            print(f"{k}: {list(v.shape)}")
        print(f"wrote {path}")
        return 0
    interp_opts = [o for o, v in (("--input-model-data", a.input_model_data),
                                  ("--input-node", a.input_node),
                                  ("--output-node", a.output_node),
                                  ("--res-filename", a.res_filename)) if v]
    if interp_opts:
        raise ToolkitError(f"{', '.join(interp_opts)} are interpreter options",
                           where="--target", fix="drop them or use --target interpreter")
    out = _codegen(model, a.output_dir, name)
    print(f"wrote the {name} artifact to {a.output_dir}" + (f": {out}" if out else ""))
    return 0
