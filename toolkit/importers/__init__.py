"""Importers: other frameworks' model files -> the toolkit's IR (:mod:`toolkit.ir`).

:mod:`.caffe` reads Caffe networks (``.prototxt`` + ``.caffemodel``); :mod:`.onnx` reads ONNX
models, each node with its PyTorch layer.
"""
