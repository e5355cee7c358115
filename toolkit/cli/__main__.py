"""``python -m toolkit.cli``: the same command line as the ``toolkit`` console script."""

from __future__ import annotations

import sys

from toolkit.cli import main

if __name__ == "__main__":
    sys.exit(main())
