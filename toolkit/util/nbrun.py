"""Execute a notebook with a local kernel that talks over IPC sockets in a private temporary
folder: nothing listens on TCP (so the kernel has no "running over TCP without encryption"
warning to give) and no socket file is left in the working folder."""

from __future__ import annotations

import os
import tempfile
from typing import Any

__all__ = ["execute_notebook"]


def execute_notebook(nb: Any, cwd: str | os.PathLike[str], *, timeout: int = 600,
                     kernel_name: str = "python3") -> Any:
    """Execute every cell of the nbformat notebook ``nb`` in place, the kernel started in
    ``cwd``; return ``nb`` (its cells now hold their outputs).

    Raises nbclient's ``CellExecutionError`` when a cell raises."""
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    with tempfile.TemporaryDirectory(prefix="toolkit-kernel-") as sockets:
        km = KernelManager(kernel_name=kernel_name, transport="ipc",
                           ip=os.path.join(sockets, "kernel"))
        try:
            NotebookClient(nb, km=km, timeout=timeout, kernel_name=kernel_name,
                           resources={"metadata": {"path": os.fspath(cwd)}}).execute()
        finally:  # a client given its manager leaves the kernel running: stop it here
            if km.has_kernel:
                km.shutdown_kernel(now=True)
    return nb
