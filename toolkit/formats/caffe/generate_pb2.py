"""Regenerate ``caffe_pb2.py`` from ``caffe.proto`` with protoc from ``grpcio-tools``.

    pip install grpcio-tools && python -m toolkit.formats.caffe.generate_pb2

The generated module is committed, so reading Caffe models needs only the ``protobuf`` runtime.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    """Run protoc on caffe.proto into this folder; return protoc's exit status."""
    from grpc_tools import protoc

    return int(protoc.main(["protoc", f"-I{HERE}", f"--python_out={HERE}",
                            f"--pyi_out={HERE}", str(HERE / "caffe.proto")]))


if __name__ == "__main__":
    sys.exit(main())
