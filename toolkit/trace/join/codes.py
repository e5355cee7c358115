"""Per-row texts kept as small integer codes: reasons, problems (no Python string per row)."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["TextCodes"]

_STR = pd.Series([""]).dtype  # pandas' default text dtype


class TextCodes:
    """One text per row as a code into :attr:`texts`; code 0 is ``""`` (nothing to say).

    A row keeps the first text it is given: later texts go only to rows still at 0.

    Attributes:
        texts: the distinct texts, ``""`` first.
        codes: ``int32`` code per row.
    """

    def __init__(self, n: int) -> None:
        self.texts: list[str] = [""]
        self.codes = np.zeros(n, dtype=np.int32)
        self._index: dict[str, int] = {"": 0}

    def code(self, text: str) -> int:
        """The code of ``text`` (added when new)."""
        found = self._index.get(text)
        if found is None:
            found = self._index[text] = len(self.texts)
            self.texts.append(text)
        return found

    def set_rows(self, rows: np.ndarray, text: str) -> None:
        """Give ``text`` to the listed rows that have no text yet."""
        if len(rows) == 0:
            return
        free = rows[self.codes[rows] == 0]
        if len(free):
            self.codes[free] = self.code(text)

    def set_mask(self, mask: np.ndarray, text: str) -> None:
        """Give ``text`` to the rows of ``mask`` that have no text yet."""
        if mask.any():
            self.set_rows(np.flatnonzero(mask), text)

    def set_column(self, values: pd.Series) -> None:
        """Take the texts of a column (categorical or not; missing and ``""`` mean none) for
        the rows that have no text yet."""
        if isinstance(values.dtype, pd.CategoricalDtype):
            texts = [str(c) for c in values.cat.categories]
            table = np.array([self.code(t) if t else 0 for t in texts] + [0], dtype=np.int32)
            if not table.any():
                return  # every category is "": nothing to say
            given = table[values.cat.codes.to_numpy()]
            np.copyto(self.codes, given, where=self.codes == 0)
            return
        objects = values.astype(object).to_numpy()
        present = pd.notna(objects)
        for text in pd.unique(objects[present]).tolist():
            if text is not None and str(text) != "":
                self.set_mask(present & (objects == text), str(text))

    def categorical(self) -> pd.Categorical:
        """The texts per row as a categorical of ``str``."""
        return pd.Categorical.from_codes(self.codes.astype(np.int64),
                                         categories=pd.Index(self.texts, dtype=_STR))
