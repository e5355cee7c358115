"""Compile a model: optimise it with provenance-keeping passes and lower it to a command queue.

    import toolkit.compile
    compiled = toolkit.compile(model)            # or toolkit.compile.compile_model(model)
    compiled.optimised_ops(); compiled.origins(); compiled.commands()
    compiled.save("out/")                        # <stem>.circle, <stem>_debug.xml, ...

The module itself is callable: ``toolkit.compile(model, passes=None, target=None)`` is
:func:`compile_model`, so the name works both as the package and as the function.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from toolkit.compile.compiled import CompiledModel
from toolkit.compile.copy_model import copy_model
from toolkit.compile.lowering import Command
from toolkit.compile.pass_manager import PassManager
from toolkit.compile.passes import DEFAULT_PASSES, PASSES, GraphPass, PassResult
from toolkit.compile.pipeline import compile_model
from toolkit.compile.saved import load_compiled
from toolkit.compile.target import Target

__all__ = ["compile_model", "CompiledModel", "Target", "DEFAULT_PASSES", "PASSES", "Command",
           "PassManager", "PassResult", "GraphPass", "copy_model", "load_compiled"]


class _CallableModule(types.ModuleType):
    """This package, callable as :func:`compile_model`."""

    def __call__(self, model: Any, passes: Any = None, target: Any = None,
                 **kwargs: Any) -> CompiledModel:
        return compile_model(model, passes, target, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
