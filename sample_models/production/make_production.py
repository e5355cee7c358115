"""Copy a few small production models out of the MediaPipe wheel (Apache-2.0).

Downloads ``mediapipe==0.10.14`` (the last 0.10 wheels that still ship the ``.tflite`` files of
``mediapipe/modules/``; later 0.10 wheels download them at run time) once, with pip, into a
cache folder, and copies the models listed in ``MODELS`` next to this script. Writes
``manifest.json``: per file its sha256, its path inside the wheel, its size, its input shapes
and its op codes (custom ops by custom code).

Run from the repository root (pip and network needed; MediaPipe itself is never imported)::

    python sample_models/production/make_production.py [--wheel-dir DIR]

The files are read with the FlatBuffer bindings the toolkit already depends on, so the
manifest does not depend on the toolkit's own reader.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
WHEEL = "mediapipe==0.10.14"
PLATFORM = "manylinux_2_17_x86_64"

#: file name -> (path inside the wheel, why it is here)
MODELS = {
    "face_detection_full_range_sparse.tflite": (
        "mediapipe/modules/face_detection/face_detection_full_range_sparse.tflite",
        "sparse float16 weights: 46 DENSIFY ops, each followed by a DEQUANTIZE"),
    "face_detection_short_range.tflite": (
        "mediapipe/modules/face_detection/face_detection_short_range.tflite",
        "float16 weights: 74 weight DEQUANTIZE ops"),
    "selfie_segmentation.tflite": (
        "mediapipe/modules/selfie_segmentation/selfie_segmentation.tflite",
        "float16 weights and the custom op Convolution2DTransposeBias"),
    "hand_recrop.tflite": (
        "mediapipe/modules/holistic_landmark/hand_recrop.tflite",
        "float32 weights, plain builtin ops"),
    "face_landmark_with_attention.tflite": (
        "mediapipe/modules/face_landmark/face_landmark_with_attention.tflite",
        "float16 weights and the custom ops Landmarks2TransformMatrix, TransformLandmarks and "
        "TransformTensorBilinear (LiteRT does not run it without them registered)"),
}


def _wheel(cache: Path) -> Path:
    found = sorted(glob.glob(str(cache / "mediapipe-0.10.14-*.whl")))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary",
                        ":all:", "--platform", PLATFORM, "--python-version", "3.11", WHEEL,
                        "-d", str(cache)], check=True)
        found = sorted(glob.glob(str(cache / "mediapipe-0.10.14-*.whl")))
    return Path(found[0])


def _describe(data: bytes) -> dict[str, object]:
    from toolkit.schema import BUILTIN_NAMES, fb

    m = fb.Model.Model.GetRootAs(data, 0)
    ops: Counter[str] = Counter()
    for s in range(m.SubgraphsLength()):
        sg = m.Subgraphs(s)
        for i in range(sg.OperatorsLength()):
            oc = m.OperatorCodes(sg.Operators(i).OpcodeIndex())
            name = BUILTIN_NAMES[max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())]
            ops[oc.CustomCode().decode() if name == "CUSTOM" else name] += 1
    sg = m.Subgraphs(0)
    inputs = []
    for k in range(sg.InputsLength()):
        t = sg.Tensors(sg.Inputs(k))
        sig = t.ShapeSignatureAsNumpy().tolist() if t.ShapeSignatureLength() else None
        inputs.append({"name": t.Name().decode(), "shape": t.ShapeAsNumpy().tolist(),
                       "shape_signature": sig})
    sparse = sum(sg.Tensors(i).Sparsity() is not None for i in range(sg.TensorsLength()))
    return {"inputs": inputs, "sparse_tensors": sparse, "ops": dict(sorted(ops.items()))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheel-dir", type=Path, default=HERE / ".wheel-cache")
    args = ap.parse_args()
    args.wheel_dir.mkdir(parents=True, exist_ok=True)
    wheel = _wheel(args.wheel_dir)
    manifest = {"source": f"{WHEEL} ({wheel.name}) from PyPI", "license": "Apache-2.0",
                "models": []}
    with zipfile.ZipFile(wheel) as z:
        for name, (inner, why) in MODELS.items():
            data = z.read(inner)
            (HERE / name).write_bytes(data)
            manifest["models"].append({
                "file": name, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
                "wheel_path": inner, "why": why, **_describe(data)})
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"wrote {len(MODELS)} models and manifest.json to {HERE}")


if __name__ == "__main__":
    main()
