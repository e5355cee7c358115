"""Sparse constants (TFLite's ``sparsity`` field and DENSIFY): layouts decoded as TFLite's
FormatConverter places values (dense, CSR, block CSR, another traversal order), models with
sparse constants written by ``tk.save`` that LiteRT densifies to the same values the toolkit
reads, and sparsity fields that do not match their buffers refused by name."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support import litert_run

import toolkit as tk
from toolkit.builder import ModelBuilder
from toolkit.errors import ModelFormatError, ToolkitError
from toolkit.formats.sparsity import SparsityError, densify, read_layout
from toolkit.schema import fb

RNG = np.random.default_rng(7)


def _vec(values: list[int]) -> Any:
    v = fb.Int32Vector.Int32VectorT()
    v.values = list(values)
    return v


def _dense_dim(size: int) -> Any:
    d = fb.DimensionMetadata.DimensionMetadataT()
    d.format, d.denseSize = 0, size
    return d


def _csr_dim(segments: list[int], indices: list[int]) -> Any:
    d = fb.DimensionMetadata.DimensionMetadataT()
    d.format = 1
    d.arraySegmentsType = d.arrayIndicesType = fb.SparseIndexVector.SparseIndexVector.Int32Vector
    d.arraySegments, d.arrayIndices = _vec(segments), _vec(indices)
    return d


def _sparsity(order: list[int], dims: list[Any], block_map: list[int] | None = None) -> Any:
    sp = fb.SparsityParameters.SparsityParametersT()
    sp.traversalOrder = order
    sp.blockMap = block_map
    sp.dimMetadata = dims
    return sp


def encode_csr(w: np.ndarray) -> tuple[np.ndarray, Any]:
    """Rows dense, columns CSR (the TFLite converter's 2-D layout)."""
    segs, idx, vals = [0], [], []
    for row in w:
        nz = np.nonzero(row)[0]
        idx += nz.tolist()
        vals += row[nz].tolist()
        segs.append(len(idx))
    return (np.asarray(vals, dtype=w.dtype),
            _sparsity([0, 1], [_dense_dim(w.shape[0]), _csr_dim(segs, idx)]))


def encode_block_csr(w: np.ndarray, block: int) -> tuple[np.ndarray, Any]:
    """Rows dense, column blocks of ``block`` CSR, each kept block dense (TFLite's 1 x block
    sparsity: traversal [0, 1, 2], block_map [1])."""
    rows, cols = w.shape
    segs, idx, vals = [0], [], []
    for row in w:
        for b in range(cols // block):
            chunk = row[b * block:(b + 1) * block]
            if chunk.any():
                idx.append(b)
                vals += chunk.tolist()
        segs.append(len(idx))
    dims = [_dense_dim(rows), _csr_dim(segs, idx), _dense_dim(block)]
    return np.asarray(vals, dtype=w.dtype), _sparsity([0, 1, 2], dims, [1])


def _sparse_weight(shape: tuple[int, int], block: int = 1) -> np.ndarray:
    w = RNG.uniform(-1, 1, shape).astype(np.float32)
    if block == 1:
        w[RNG.random(shape) < 0.6] = 0
    else:
        mask = RNG.random((shape[0], shape[1] // block)) < 0.5
        w[np.repeat(mask, block, axis=1)] = 0
    return w


def _model(w: np.ndarray, values: np.ndarray, sp: Any) -> tk.Model:
    mb = ModelBuilder("sparse")
    x = mb.input("x", list(w.shape))
    c = mb.const("w_sparse", w)
    c.extra.update(sparsity=sp, sparse_values=values, sparse_dense=c.data)
    dense = mb.op("DENSIFY", [c], w.shape, name="w")
    mb.output(mb.binary("ADD", x, dense, name="y"))
    return mb.build()


def test_layouts_decode_to_the_dense_array() -> None:
    w = _sparse_weight((5, 12))
    vals, sp = encode_csr(w)
    np.testing.assert_array_equal(densify(vals, read_layout(sp), w.shape), w)
    wb = _sparse_weight((4, 12), block=4)
    vals, sp = encode_block_csr(wb, 4)
    np.testing.assert_array_equal(densify(vals, read_layout(sp), wb.shape), wb)
    # column-major traversal: columns dense, rows CSR
    wt = _sparse_weight((6, 3))
    vals, sp = encode_csr(np.ascontiguousarray(wt.T))
    sp.traversalOrder = [1, 0]
    sp.dimMetadata[0].denseSize = 3
    np.testing.assert_array_equal(densify(vals, read_layout(sp), wt.shape), wt)
    # all dense: the values in order
    d = np.arange(6, dtype=np.float32).reshape(2, 3)
    sp = _sparsity([0, 1], [_dense_dim(2), _dense_dim(3)])
    np.testing.assert_array_equal(densify(d.reshape(-1), read_layout(sp), (2, 3)), d)


@pytest.mark.parametrize("block", [1, 4])
def test_a_written_sparse_model_is_densified_by_litert_as_read(block: int,
                                                               tmp_path: Path) -> None:
    w = _sparse_weight((4, 16), block)
    vals, sp = encode_csr(w) if block == 1 else encode_block_csr(w, block)
    path = tk.save(_model(w, vals, sp), tmp_path / "s.tflite")
    x = RNG.uniform(-1, 1, w.shape).astype(np.float32)
    lite = litert_run(path, [x])["y"]
    np.testing.assert_array_equal(lite, x + w)
    again = tk.load(path)
    t = next(t for t in again.graph.tensors if t.extra.get("sparsity") is not None)
    np.testing.assert_array_equal(t.data, w)
    np.testing.assert_array_equal(t.extra["sparse_values"], vals)
    np.testing.assert_array_equal(tk.run(again, {"x": x}).outputs["y"], lite)
    compiled = tk.compile(again)
    assert "DENSIFY" not in {op.type for op in compiled.model.graph.ops}
    np.testing.assert_array_equal(tk.run(compiled, {"x": x}).outputs["y"], lite)


def test_changed_dense_data_is_not_written_with_stale_sparsity(tmp_path: Path) -> None:
    w = _sparse_weight((4, 8))
    vals, sp = encode_csr(w)
    model = _model(w, vals, sp)
    t = model.graph.ops[0].inputs[0]
    t.data = np.ones_like(w)
    with pytest.raises(ToolkitError, match="'w_sparse' has a sparsity field but its data"):
        tk.save(model, tmp_path / "x.tflite")
    assert not (tmp_path / "x.tflite").exists()


BAD = {
    "segments past the indices": lambda sp: setattr(sp.dimMetadata[1].arraySegments, "values",
                                                   [0, 2, 4, 99, 100]),
    "an index outside the row": lambda sp: setattr(
        sp.dimMetadata[1].arrayIndices, "values",
        [50, *list(sp.dimMetadata[1].arrayIndices.values)[1:]]),
    "a traversal order that is no permutation": lambda sp: setattr(sp, "traversalOrder",
                                                                   [0, 0]),
    "a dense size that is not the shape's": lambda sp: setattr(sp.dimMetadata[0], "denseSize",
                                                              3),
    "a block map naming no dimension": lambda sp: setattr(sp, "blockMap", [5]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_sparsity_that_does_not_match_its_buffer_is_refused_by_name(case: str,
                                                                    tmp_path: Path) -> None:
    w = _sparse_weight((4, 8))
    w[:, :2] = 1.0  # every row keeps a value
    vals, sp = encode_csr(w)
    path = tk.save(_model(w, vals, sp), tmp_path / "s.tflite")
    m = fb.Model.ModelT.InitFromPackedBuf(path.read_bytes(), 0)
    t = next(t for t in m.subgraphs[0].tensors if t.sparsity is not None)
    BAD[case](t.sparsity)
    import flatbuffers

    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    with pytest.raises(ModelFormatError, match=r"tensor \d+ \('w_sparse'\) has sparsity "
                                               r"metadata that does not match"):
        tk.load(bytes(b.Output()))


def test_a_buffer_with_fewer_values_than_the_metadata_is_refused() -> None:
    w = _sparse_weight((4, 8))
    vals, sp = encode_csr(w)
    with pytest.raises(SparsityError, match=r"places .* values, the buffer holds"):
        densify(vals[:-1], read_layout(sp), w.shape)


def test_fuzzed_sparsity_fields_load_or_are_refused(tmp_path: Path) -> None:
    """Random integers in every sparsity vector and size: a ToolkitError or a model, never
    another exception."""
    import flatbuffers

    w = _sparse_weight((6, 8), block=4)
    vals, sp = encode_block_csr(w, 4)
    raw = tk.save(_model(w, vals, sp), tmp_path / "s.tflite").read_bytes()
    rng = random.Random(29)
    bad = [-(1 << 31), -1, 0, 1, 2, 3, 7, 8, 255, 1 << 20, (1 << 31) - 1]
    outcomes = {"refused": 0, "loaded": 0}
    for _ in range(120):
        m = fb.Model.ModelT.InitFromPackedBuf(raw, 0)
        spm = next(t for t in m.subgraphs[0].tensors if t.sparsity is not None).sparsity
        spm.traversalOrder = list(spm.traversalOrder)
        for d in spm.dimMetadata:
            for v in (d.arraySegments, d.arrayIndices):
                if v is not None:
                    v.values = list(v.values)
        for _ in range(rng.randint(1, 3)):
            kind = rng.choice(["order", "map", "dense", "seg", "idx", "format"])
            dm = rng.choice(spm.dimMetadata)
            if kind == "order":
                spm.traversalOrder[rng.randrange(3)] = rng.choice(bad)
            elif kind == "map":
                spm.blockMap = [rng.choice(bad)]
            elif kind == "dense":
                dm.denseSize = rng.choice(bad)
            elif kind == "format":
                dm.format = rng.choice([0, 1, 2, 7])
            elif dm.arraySegments is not None:
                vec = dm.arraySegments if kind == "seg" else dm.arrayIndices
                vec.values[rng.randrange(len(vec.values))] = rng.choice(bad)
        b = flatbuffers.Builder(1024)
        b.Finish(m.Pack(b), file_identifier=b"TFL3")
        try:
            tk.load(bytes(b.Output()))
        except ToolkitError:
            outcomes["refused"] += 1
        else:
            outcomes["loaded"] += 1
    assert outcomes["refused"] > 50
