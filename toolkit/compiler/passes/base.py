"""What a compiler pass is: a callable ``model -> PassResult(model, modified)``.

A pass rewrites graphs in place through the graph methods of :mod:`toolkit.ir` only, so every
rewrite keeps provenance. Each pass states in ``relation`` how it treats origins:

* ``absorb``: an existing op swallows others (their origins join its set);
* ``fuse``: a new op replaces several (it inherits the union of their origins);
* ``replace``: a new op replaces one (it copies the origins);
* ``remove``: an op disappears (its origins are recorded as removed).

Rules for pass authors: work from one snapshot of ``graph.ops`` plus a worklist (reading
``graph.ops`` after a rewrite re-sorts the whole graph); never edit an options object, a
quantization or a constant array in place (the source model may share them): set a new one;
leave alone whatever the pass cannot handle (dtype, dynamic shape, unknown op).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from toolkit.ir import Graph, Model

__all__ = ["PassResult", "GraphPass", "drop_unused_tensors"]


@dataclass(frozen=True)
class PassResult:
    """The result of one pass run: the model (rewritten in place) and whether it changed."""

    model: Model
    modified: bool


def drop_unused_tensors(graph: Graph) -> int:
    """Remove tensors that no op produces or reads and that are not graph inputs, outputs
    or an op's ``intermediates``; return how many were removed."""
    tensors = graph.tensors
    keep = {id(t) for t in (*graph.inputs, *graph.outputs)}
    for t in tensors:
        p = t.producer
        if p is not None and p.extra.get("intermediates"):
            keep.update(id(x) for x in p.extra["intermediates"] if x is not None)
    n = 0
    for t in tensors:
        if t.producer is None and not t.consumers and id(t) not in keep:
            graph.remove_tensor(t)
            n += 1
    return n


class GraphPass:
    """Base class of the passes: runs :meth:`run` on every subgraph of a model, between
    :meth:`requires` and :meth:`ensures` (as onnx-ir's passes do)."""

    #: Name used in logs, errors and ``rewrites()``.
    name: ClassVar[str] = "pass"
    #: How the pass treats origins: absorb, fuse, replace or remove (or several, "+"-joined).
    relation: ClassVar[str] = ""

    def __call__(self, model: Model) -> PassResult:
        """Run the pass on every subgraph; return ``PassResult(model, modified)``."""
        self.requires(model)
        modified = False
        for g in model.subgraphs:
            if self.run(g):
                modified = True
                drop_unused_tensors(g)
        self.ensures(model)
        return PassResult(model, modified)

    def requires(self, model: Model) -> None:
        """Check preconditions before the pass runs (raise to refuse); none by default."""

    def ensures(self, model: Model) -> None:
        """Check postconditions after the pass ran (raise when broken); none by default."""

    def run(self, graph: Graph) -> bool:
        """Rewrite ``graph`` in place; return True when anything changed."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} ({self.relation})>"
