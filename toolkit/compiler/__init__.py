"""Compile a model: optimise it with provenance-keeping passes and lower it to a command queue.

    from toolkit.compiler import compile_model
    compiled = compile_model(model)              # or tk.compile(model)
    compiled.optimised_ops(); compiled.origins(); compiled.commands()
    compiled.save("out/")                        # <stem>.circle, <stem>_debug.xml, ...

"""

from __future__ import annotations

from toolkit.compiler.compiled import CompiledModel
from toolkit.compiler.copy_model import copy_model
from toolkit.compiler.lowering import Command
from toolkit.compiler.pass_manager import PassManager
from toolkit.compiler.passes import DEFAULT_PASSES, PASSES, GraphPass, PassResult
from toolkit.compiler.pipeline import compile_model
from toolkit.compiler.saved import load_compiled
from toolkit.compiler.target import Target

__all__ = ["compile_model", "CompiledModel", "Target", "DEFAULT_PASSES", "PASSES", "Command",
           "PassManager", "PassResult", "GraphPass", "copy_model", "load_compiled"]
