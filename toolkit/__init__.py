"""toolkit: keep the thread from each original layer of a model to every runtime trace event.

    import toolkit as tk
    model = tk.load("sample_models/cnn.tflite")
    model.ops_table()
"""

from toolkit import formats, schema
from toolkit.errors import ToolkitError
from toolkit.formats.flatbuffer_read import load
from toolkit.formats.flatbuffer_write import save
from toolkit.ir import Graph, Model, Op, Quantization, Tensor

__all__ = ["formats", "schema", "ToolkitError", "load", "save", "Graph", "Model", "Op", "Quantization", "Tensor"]
__version__ = "0.1.0"
