"""Vela's CSV reports: ``<stem>_per-layer.csv`` and ``<stem>_summary_<system config>.csv``.

``vela --verbose-performance`` writes the per-layer file, one row per scheduled operation. The
two Vela 5 cores write different headers:

- default core: ``Original Operator,NNG Operator,Target,Staging Usage,Peak% (Staging),Op Cycles,
  Network% (cycles),NPU,SRAM AC,DRAM AC,OnFlash AC,OffFlash AC,MAC Count,Network% (MAC),
  Util% (MAC),Name``. Cells are joined with bare commas (nothing is quoted), so a ``Name`` holding
  a comma spills over; this reader puts the spill back into ``name``, which is the last column.
- legacy core: ``TFLite_operator,NNG Operator,SRAM Usage,Peak%,Op Cycles,Network%,NPU,SRAM AC,
  DRAM AC,OnFlash AC,OffFlash AC,MAC Count,Network%,Util%,Name`` (``TOSA_operator`` for TOSA
  input), written by Python's csv module; the header is repeated before the rows of each NPU
  subgraph; ``Network%`` appears twice (cycles, then MACs); only NPU subgraphs are listed; cycle
  counts are floats (``3520.0``, sometimes ``16.5``).

Both are normalised to the same snake_case columns (see :data:`PER_LAYER_COLUMNS`).
"""

from __future__ import annotations

import csv
import io
import os
import re

import numpy as np
import pandas as pd

from toolkit.errors import VelaError
from toolkit.util.files import check_path, read_bytes

__all__ = [
    "PER_LAYER_COLUMNS",
    "DEFAULT_CORE_HEADER",
    "LEGACY_CORE_HEADER",
    "read_per_layer_csv",
    "read_summary_csv",
]

#: Header of the default core's per-layer CSV.
DEFAULT_CORE_HEADER: list[str] = [
    "Original Operator", "NNG Operator", "Target", "Staging Usage", "Peak% (Staging)",
    "Op Cycles", "Network% (cycles)", "NPU", "SRAM AC", "DRAM AC", "OnFlash AC", "OffFlash AC",
    "MAC Count", "Network% (MAC)", "Util% (MAC)", "Name",
]

#: Header of the legacy core's per-layer CSV (TFLite input).
LEGACY_CORE_HEADER: list[str] = [
    "TFLite_operator", "NNG Operator", "SRAM Usage", "Peak%", "Op Cycles", "Network%", "NPU",
    "SRAM AC", "DRAM AC", "OnFlash AC", "OffFlash AC", "MAC Count", "Network%", "Util%", "Name",
]

#: Normalised column name -> meaning (units in the name: ``_bytes``, ``_pct``, ``_cycles``;
#: ``_ac`` columns are memory access cycles, ``mac_count`` is a count of multiply-accumulates).
PER_LAYER_COLUMNS: dict[str, str] = {
    "original_operator": "operator type of the input model (default: 'Conv2D'; legacy: 'CONV_2D')",
    "nng_operator": "operator type Vela scheduled ('Conv2D', 'Relu', 'LUT', ...)",
    "target": "'NPU' or 'CPU' (legacy files list NPU subgraphs only: always 'NPU')",
    "staging_usage_bytes": "bytes of the staging (SRAM) area in use at this op (legacy label: "
                           "'SRAM Usage')",
    "staging_peak_pct": "staging_usage_bytes as a percentage of the network's peak",
    "op_cycles": "estimated cycles of the op",
    "network_cycles_pct": "op_cycles as a percentage of the network's cycles",
    "npu_cycles": "estimated NPU compute cycles of the op",
    "sram_ac": "SRAM access cycles",
    "dram_ac": "DRAM access cycles",
    "on_chip_flash_ac": "on-chip flash access cycles",
    "off_chip_flash_ac": "off-chip flash access cycles",
    "mac_count": "multiply-accumulates of the op",
    "network_mac_pct": "mac_count as a percentage of the network's MACs",
    "mac_util_pct": "MAC utilisation of the op, percent",
    "name": "name of the scheduled op (its output tensor name, maybe with a Vela suffix)",
}

_RENAME: dict[str, str] = {
    "Original Operator": "original_operator",
    "TFLite_operator": "original_operator",
    "TOSA_operator": "original_operator",
    "NNG Operator": "nng_operator",
    "Target": "target",
    "Staging Usage": "staging_usage_bytes",
    "SRAM Usage": "staging_usage_bytes",
    "Peak% (Staging)": "staging_peak_pct",
    "Peak%": "staging_peak_pct",
    "Op Cycles": "op_cycles",
    "Network% (cycles)": "network_cycles_pct",
    "NPU": "npu_cycles",
    "SRAM AC": "sram_ac",
    "DRAM AC": "dram_ac",
    "OnFlash AC": "on_chip_flash_ac",
    "OffFlash AC": "off_chip_flash_ac",
    "MAC Count": "mac_count",
    "Network% (MAC)": "network_mac_pct",
    "Util% (MAC)": "mac_util_pct",
    "Util%": "mac_util_pct",
    "Name": "name",
}
_TEXT_COLUMNS = frozenset({"original_operator", "nng_operator", "target", "name"})
# Always float64: the legacy core reports half cycles; percentages may be NaN.
_FLOAT_COLUMNS = frozenset({"staging_peak_pct", "op_cycles", "network_cycles_pct", "npu_cycles",
                            "sram_ac", "dram_ac", "on_chip_flash_ac", "off_chip_flash_ac",
                            "network_mac_pct", "mac_util_pct"})
_LEGACY_FIRST = re.compile(r"[A-Za-z]+_operator\Z")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_INT_FLOAT = re.compile(r"-?[0-9]+(\.0*)?\Z")


def _snake(name: str) -> str:
    """Return ``name`` in snake_case with ``%`` spelt ``pct`` (for columns not in _RENAME)."""
    s = name.replace("%", " pct ")
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    s = re.sub(r"[^0-9A-Za-z]+", "_", s).strip("_").lower()
    return s or "column"


def _normalise_header(header: list[str]) -> list[str]:
    """Return the normalised column names for ``header``, unique, in the same order."""
    out: list[str] = []
    network_seen = 0
    for col in header:
        col = col.strip()
        if col == "Network%":
            # Legacy core: the first one follows Op Cycles, the second one MAC Count.
            new = "network_cycles_pct" if network_seen == 0 else "network_mac_pct"
            network_seen += 1
        else:
            new = _RENAME.get(col) or _snake(col)
        base, k = new, 2
        while new in out:
            new = f"{base}_{k}"
            k += 1
        out.append(new)
    return out


def _convert(col: str, values: list[str], where: str) -> pd.Series:
    """Return one column: str for text columns, float64 for the cycle and percentage columns,
    else int64 when every value is integral, float64 when all are numbers, str otherwise."""
    if col in _FLOAT_COLUMNS:
        try:
            return pd.Series(np.array([float(v) for v in values], dtype=np.float64))
        except ValueError as exc:
            raise VelaError(f"column '{col}' holds a value that is not a number ({exc})",
                            where=where,
                            fix=("the file is damaged or hand-edited: re-run vela with "
                                 "--verbose-performance to write it again")) from None
    if col not in _TEXT_COLUMNS and values:
        stripped = [v.strip() for v in values]
        if all(len(v.split(".", 1)[0]) <= 20 and _INT_FLOAT.match(v) for v in stripped):
            ints = [int(v.split(".", 1)[0]) for v in stripped]
            if all(_INT64_MIN <= i <= _INT64_MAX for i in ints):
                return pd.Series(np.array(ints, dtype=np.int64))
        try:
            return pd.Series(np.array([float(v) for v in stripped], dtype=np.float64))
        except ValueError:
            pass
    return pd.Series(values, dtype="str")


def _read_text(path: str | os.PathLike[str]) -> tuple[str, str]:
    """Return (text, where) of a CSV report; VelaError when it cannot be read or decoded."""
    where = check_path(path, what="Vela CSV", error=VelaError)
    raw = read_bytes(where, what="Vela CSV", error=VelaError,
                     fix="pass a CSV written by vela --verbose-performance")
    try:
        return raw.decode("utf-8-sig"), where
    except UnicodeDecodeError as exc:
        raise VelaError(f"not UTF-8 text (byte {exc.start})", where=where,
                        fix="pass a CSV written by vela --verbose-performance") from None


def read_per_layer_csv(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read Vela's ``<stem>_per-layer.csv`` (either core) into one normalised DataFrame.

    Returns:
        one row per scheduled op in file order, columns in file order renamed as in
        :data:`PER_LAYER_COLUMNS`: ``original_operator``, ``nng_operator``, ``target``,
        ``staging_usage_bytes``, ``staging_peak_pct``, ``op_cycles``, ``network_cycles_pct``,
        ``npu_cycles``, ``sram_ac``, ``dram_ac``, ``on_chip_flash_ac``, ``off_chip_flash_ac``
        (access cycles), ``mac_count``, ``network_mac_pct``, ``mac_util_pct``, ``name``. A legacy
        file gets a ``target`` column ('NPU', after ``nng_operator``). Unknown columns are kept,
        snake_cased. Cycle, access-cycle and percentage columns are always float64 (the legacy
        core reports half cycles; ``NaN`` allowed); ``staging_usage_bytes``, ``mac_count`` and
        unknown numeric columns are int64 when every value is integral (``3520.0`` -> 3520), else
        float64; text columns are str. ``df.attrs["core"]`` is ``"default"``,
        ``"legacy"`` or ``"unknown"``.

    Raises:
        VelaError: unreadable file, empty file, or a row whose cell count does not fit the header
            (the message names the file and line).
    """
    text, where = _read_text(path)
    lines = text.splitlines()
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is None:
        raise VelaError("the per-layer CSV is empty", where=where,
                        fix="re-run vela with --verbose-performance")
    header = next(csv.reader([lines[first]]))
    header = [h.strip() for h in header]
    if header and header[0] == "Original Operator":
        core = "default"
    elif header and _LEGACY_FIRST.match(header[0]):
        core = "legacy"
    else:
        core = "unknown"
    if not any(h in _RENAME or h == "Network%" for h in header):
        raise VelaError(f"the first line is not a Vela per-layer header: {lines[first][:120]!r}",
                        where=f"{where}:{first + 1}",
                        fix="pass the <stem>_per-layer.csv written by vela --verbose-performance")
    n = len(header)
    name_last = header[-1] == "Name"

    rows: list[list[str]] = []

    def add(cells: list[str], lineno: int) -> None:
        if len(cells) != n:
            raise VelaError(f"row has {len(cells)} cells but the header has {n}",
                            where=f"{where}:{lineno}",
                            fix="the file is truncated or damaged; re-run vela")
        rows.append(cells)

    if core == "default":
        # Written with ",".join and nothing quoted: split on commas, the name keeps the rest.
        for i in range(first + 1, len(lines)):
            if lines[i].strip():
                add(lines[i].split(",", n - 1) if name_last else lines[i].split(","), i + 1)
    else:
        body = "\n".join(lines[first + 1:])
        reader = csv.reader(io.StringIO(body, newline=""), strict=True)
        try:
            for cells in reader:
                lineno = first + 1 + reader.line_num
                if not any(c.strip() for c in cells):
                    continue
                if [c.strip() for c in cells] == header:
                    continue  # the legacy core repeats the header for every NPU subgraph
                if name_last and len(cells) > n:
                    cells = [*cells[: n - 1], ",".join(cells[n - 1:])]
                add(cells, lineno)
        except csv.Error as exc:
            raise VelaError(f"not valid CSV ({exc})",
                            where=f"{where}:{first + 1 + reader.line_num}",
                            fix=("the file is damaged or hand-edited: re-run vela with "
                                 "--verbose-performance to write it again")) from None

    names = _normalise_header(header)
    columns = list(zip(*rows)) if rows else [() for _ in names]
    data = {col: _convert(col, list(vals), where) for col, vals in zip(names, columns)}
    df = pd.DataFrame(data, columns=names)
    if core == "legacy" and "target" not in df.columns:
        pos = names.index("nng_operator") + 1 if "nng_operator" in names else len(names)
        df.insert(pos, "target", pd.Series(["NPU"] * len(df), dtype="str"))
    df.attrs["core"] = core
    return df


def read_summary_csv(path: str | os.PathLike[str]) -> dict[str, int | float | str]:
    """Read Vela's ``<stem>_summary_<system config>.csv`` (a header line and one value line).

    Returns:
        ``{column: value}`` in file order. Integral numbers become int (``16848.0`` -> 16848;
        e.g. ``cycles_total``, ``cycles_npu``, ``nn_macs``, ``core_clock`` in Hz), other numbers
        float (e.g. ``inference_time`` in seconds, bandwidths in GB/s), the rest str
        (``network``, ``accelerator_configuration``, ...).

    Raises:
        VelaError: unreadable file, or not exactly one value line matching the header.
    """
    text, where = _read_text(path)
    rows = [r for r in csv.reader(io.StringIO(text, newline="")) if any(c.strip() for c in r)]
    if len(rows) != 2:
        raise VelaError(f"expected a header line and one value line, found {len(rows)} lines",
                        where=where, fix="pass the summary CSV written by vela")
    header, values = rows
    if len(header) != len(values):
        raise VelaError(f"the header has {len(header)} cells but the values {len(values)}",
                        where=f"{where}:2",
                        fix=("the file is damaged or hand-edited: re-run vela with "
                             "--verbose-performance to write it again"))
    out: dict[str, int | float | str] = {}
    for key, raw in zip(header, values):
        v = raw.strip()
        if len(v.split(".", 1)[0]) <= 4000 and _INT_FLOAT.match(v):
            out[key] = int(v.split(".", 1)[0])
        else:
            try:
                out[key] = float(v)
            except ValueError:
                out[key] = raw
    return out
