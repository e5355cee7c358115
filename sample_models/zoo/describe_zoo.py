"""Write README.md of the converter zoo: the models, their inputs and op codes.

Needs only the toolkit (not TensorFlow): reads ``zoo.json`` (written by ``make_zoo.py``) and
every ``.tflite`` of this folder, and lists the op codes of all subgraphs (a WHILE's cond and
body included)::

    python sample_models/zoo/describe_zoo.py
"""

from __future__ import annotations

import json
from pathlib import Path

from toolkit.formats.flatbuffer_read import load

HERE = Path(__file__).resolve().parent

HEADER = """# Converter zoo

Keras models with random weights converted by TensorFlow's own TFLite converter (TF 2.21,
Keras 3.15; the fused LSTM through `tf_keras` 2.21), so every op sequence, name and
quantization parameter is the converter's. Made by `make_zoo.py` (needs TensorFlow in a
virtual environment of its own: `pip install tensorflow-cpu==2.21.0 tf_keras==2.21.0`;
regenerate with `python sample_models/zoo/make_zoo.py`, then this table with
`python sample_models/zoo/describe_zoo.py`). TensorFlow is not needed to use the files.

* `<name>.tflite` is float32; `<name>_int8.tflite` is the same model fully quantized to int8
  (int8 input and output, calibrated on 32 fixed pseudo-random samples) where the converter
  quantizes every op. The Keras 3 RNNs (WHILE loops) and the integer-input models are
  float32 only: the converter crashes on int8 WHILE loops, and gathers of int32 indices are
  not quantized. `fused_lstm` has no int8 file: LiteRT's integer LSTM saturates its third
  LSTM (every output 127), so it is no reference; `fused_bilstm_int8` is the int8 fused LSTM.
  `<name>_dynamic.tflite` is dynamic-range quantized: int8 weights with float32 inputs and
  outputs, run by LiteRT's hybrid kernels (inputs quantized on the fly).
* An input shape starting with -1 is a free batch dimension (`shape_signature`): Keras' own
  default, which makes the converter compute reshape targets at run time (SHAPE,
  STRIDED_SLICE, PACK). `_b1` models fix the batch to 1 (the Keras RNNs must: the converter
  rejects their TensorList with a free batch).
* Integer inputs (token ids, loop counts) take values in the range given (`zoo.json`).
* `tests/test_zoo.py` runs every file in the reference runtime and LiteRT (builtin kernels,
  1 thread) before and after compiling.

| model | KiB | inputs | op codes (all subgraphs) | what it is |
| --- | ---: | --- | --- | --- |
"""


def _inputs(entry: dict) -> str:
    parts = []
    for i in entry["inputs"]:
        text = f"{i['dtype']} {i['shape']}"
        if "int" in i["dtype"] and i["dtype"] != "int8":
            lo, hi = entry["int_range"]
            text += f" in [{lo}, {hi})"
        parts.append(text)
    return "<br>".join(parts)


def main() -> None:
    """Rewrite README.md from zoo.json and the model files."""
    index = json.loads((HERE / "zoo.json").read_text())
    rows = []
    total = 0
    for _name, entry in sorted(index.items()):
        path = HERE / entry["file"]
        model = load(path)
        ops = sorted({op.kind for g in model.subgraphs for op in g.ops})
        about = " ".join(entry["about"].split())
        size = path.stat().st_size
        total += size
        rows.append(f"| `{entry['file']}` | {size // 1024} | {_inputs(entry)} | "
                    f"{', '.join(ops)} | {about} |")
    text = HEADER + "\n".join(rows) + "\n\n" + (
        f"{len(rows)} files, {total / 2**20:.1f} MiB in all.\n")
    (HERE / "README.md").write_text(text)


if __name__ == "__main__":
    main()
