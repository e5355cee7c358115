"""Small Caffe networks written in code for the Caffe importer's tests.

Each function returns a :class:`NetBuilder` holding a network shaped like a classic one
(LeNet, CIFAR-10 quick, AlexNet, a GoogLeNet inception block, a SqueezeNet fire module, a
ResNet bottleneck) or one that exercises the remaining layers, with seeded random weights.
``v1=True`` writes the legacy V1 format (only for nets whose layers exist in it).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from toolkit.formats.caffe.writer import NetBuilder


class _Net:
    """NetBuilder plus seeded weights and shape tracking for the layers used here."""

    def __init__(self, name: str, v1: bool, seed: int) -> None:
        self.nb = NetBuilder(name, v1=v1)
        self.rng = np.random.default_rng(seed)
        self.ch: dict[str, int] = {}

    def w(self, *shape: int, fan_in: int | None = None) -> np.ndarray:
        fan = fan_in or int(np.prod(shape[1:])) or 1
        return (self.rng.standard_normal(shape) / np.sqrt(fan)).astype(np.float32)

    def b(self, n: int) -> np.ndarray:
        return (0.1 * self.rng.standard_normal(n)).astype(np.float32)

    def input(self, name: str, shape: list[int]) -> str:
        self.nb.input(name, shape)
        self.ch[name] = shape[1]
        return name

    def conv(self, name: str, bottom: str, n: int, k: int, *, top: str | None = None,
             stride: int = 1, pad: int = 0, group: int = 1, bias: bool = True,
             **extra: object) -> str:
        c = self.ch[bottom]
        top = top or name
        p: dict[str, object] = {"num_output": n, "kernel_size": [k]}
        if stride != 1:
            p["stride"] = [stride]
        if pad:
            p["pad"] = [pad]
        if group != 1:
            p["group"] = group
        if not bias:
            p["bias_term"] = False
        p.update(extra)
        blobs = [self.w(n, c // group, k, k)] + ([self.b(n)] if bias else [])
        self.nb.layer(name, "Convolution", [bottom], [top], blobs=blobs, convolution_param=p)
        self.ch[top] = n
        return top

    def relu(self, name: str, blob: str, slope: float = 0.0) -> str:
        params = {"relu_param": {"negative_slope": slope}} if slope else {}
        self.nb.layer(name, "ReLU", [blob], [blob], **params)  # in place
        return blob

    def pool(self, name: str, bottom: str, kind: str, k: int = 0, s: int = 1, pad: int = 0,
             global_: bool = False) -> str:
        p: dict[str, object] = {"pool": kind}
        if global_:
            p["global_pooling"] = True
        else:
            p.update(kernel_size=k, stride=s)
            if pad:
                p["pad"] = pad
        self.nb.layer(name, "Pooling", [bottom], [name], pooling_param=p)
        self.ch[name] = self.ch[bottom]
        return name

    def ip(self, name: str, bottom: str, n: int, k: int, **extra: object) -> str:
        self.nb.layer(name, "InnerProduct", [bottom], [name],
                      blobs=[self.w(n, k), self.b(n)],
                      inner_product_param={"num_output": n, **extra})
        self.ch[name] = n
        return name

    def lrn(self, name: str, bottom: str) -> str:
        self.nb.layer(name, "LRN", [bottom], [name],
                      lrn_param={"local_size": 5, "alpha": 0.5, "beta": 0.75, "k": 1.0})
        self.ch[name] = self.ch[bottom]
        return name

    def concat(self, name: str, bottoms: list[str]) -> str:
        self.nb.layer(name, "Concat", bottoms, [name])
        self.ch[name] = sum(self.ch[b] for b in bottoms)
        return name

    def softmax(self, name: str, bottom: str, **p: object) -> str:
        self.nb.layer(name, "Softmax", [bottom], [name],
                      **({"softmax_param": p} if p else {}))
        return name

    def bn_scale(self, name: str, blob: str) -> str:
        c = self.ch[blob]
        sf = np.float32(0.5)
        mean = (0.2 * self.rng.standard_normal(c)).astype(np.float32) * sf
        var = self.rng.uniform(0.5, 1.5, c).astype(np.float32) * sf
        self.nb.layer(f"bn_{name}", "BatchNorm", [blob], [blob],
                      blobs=[mean, var, np.array([sf], np.float32)],
                      batch_norm_param={"eps": 1e-5})
        self.nb.layer(f"scale_{name}", "Scale", [blob], [blob],
                      blobs=[self.rng.uniform(0.5, 1.5, c).astype(np.float32), self.b(c)],
                      scale_param={"bias_term": True})
        return blob


def lenet(v1: bool = False) -> NetBuilder:
    n = _Net("LeNet", v1, 1)
    x = n.input("data", [1, 1, 28, 28])
    x = n.conv("conv1", x, 8, 5)
    x = n.pool("pool1", x, "MAX", 2, 2)
    x = n.conv("conv2", x, 16, 5)
    x = n.pool("pool2", x, "MAX", 2, 2)
    x = n.ip("ip1", x, 32, 16 * 4 * 4)  # a 4-D input, flattened in C, H, W order
    x = n.relu("relu1", x)
    x = n.ip("ip2", x, 10, 32)
    n.softmax("prob", x)
    return n.nb


def cifar_quick(v1: bool = False) -> NetBuilder:
    n = _Net("CIFAR10_quick", v1, 2)
    x = n.input("data", [1, 3, 32, 32])
    x = n.conv("conv1", x, 8, 5, pad=2)
    x = n.pool("pool1", x, "MAX", 3, 2)  # 32 -> 16 by Caffe's ceil rounding
    x = n.relu("relu1", x)
    x = n.conv("conv2", x, 8, 5, pad=2)
    x = n.relu("relu2", x)
    x = n.pool("pool2", x, "AVE", 3, 2)
    x = n.conv("conv3", x, 16, 5, pad=2)
    x = n.relu("relu3", x)
    x = n.pool("pool3", x, "AVE", 3, 2)
    x = n.ip("ip1", x, 16, 16 * 4 * 4)
    x = n.ip("ip2", x, 10, 16)
    n.softmax("prob", x)
    return n.nb


def alexnet(v1: bool = False) -> NetBuilder:
    n = _Net("AlexNet", v1, 3)
    x = n.input("data", [1, 3, 67, 67])
    x = n.conv("conv1", x, 16, 11, stride=4)
    x = n.relu("relu1", x)
    x = n.lrn("norm1", x)
    x = n.pool("pool1", x, "MAX", 3, 2)
    x = n.conv("conv2", x, 16, 5, pad=2, group=2)
    x = n.relu("relu2", x)
    x = n.lrn("norm2", x)
    x = n.pool("pool2", x, "MAX", 3, 2)
    x = n.conv("conv3", x, 24, 3, pad=1)
    x = n.relu("relu3", x)
    x = n.conv("conv4", x, 24, 3, pad=1, group=2)
    x = n.relu("relu4", x)
    x = n.conv("conv5", x, 16, 3, pad=1, group=2)
    x = n.relu("relu5", x)
    x = n.pool("pool5", x, "MAX", 3, 2)
    x = n.ip("fc6", x, 32, 16)  # pool5 is 1x1
    x = n.relu("relu6", x)
    n.nb.layer("drop6", "Dropout", [x], [x], dropout_param={"dropout_ratio": 0.5})
    x = n.ip("fc7", x, 32, 32)
    x = n.relu("relu7", x)
    n.nb.layer("drop7", "Dropout", [x], [x])
    x = n.ip("fc8", x, 10, 32)
    n.softmax("prob", x)
    return n.nb


def inception(v1: bool = False) -> NetBuilder:
    n = _Net("GoogLeNet_inception", v1, 4)
    x = n.input("data", [1, 16, 12, 12])
    n.nb.layer("data_split", "Split", [x], ["d1", "d2", "d3", "d4"])
    for t in ("d1", "d2", "d3", "d4"):
        n.ch[t] = 16
    b1 = n.relu("relu_1x1", n.conv("inc/1x1", "d1", 8, 1))
    r3 = n.relu("relu_3x3_reduce", n.conv("inc/3x3_reduce", "d2", 6, 1))
    b2 = n.relu("relu_3x3", n.conv("inc/3x3", r3, 8, 3, pad=1))
    r5 = n.relu("relu_5x5_reduce", n.conv("inc/5x5_reduce", "d3", 4, 1))
    b3 = n.relu("relu_5x5", n.conv("inc/5x5", r5, 4, 5, pad=2))
    p = n.pool("inc/pool", "d4", "MAX", 3, 1, pad=1)
    b4 = n.relu("relu_pool_proj", n.conv("inc/pool_proj", p, 4, 1))
    x = n.concat("inc/output", [b1, b2, b3, b4])
    x = n.pool("pool_global", x, "AVE", global_=True)
    n.nb.layer("drop", "Dropout", [x], [x], dropout_param={"dropout_ratio": 0.4})
    x = n.ip("classifier", x, 10, 24)
    n.softmax("prob", x)
    return n.nb


def squeezenet(v1: bool = False) -> NetBuilder:
    n = _Net("SqueezeNet_fire", v1, 5)
    x = n.input("data", [1, 3, 31, 31])
    x = n.relu("relu_conv1", n.conv("conv1", x, 16, 3, stride=2))
    x = n.pool("pool1", x, "MAX", 3, 2)  # 15 -> 7 (ceil)
    sq = n.relu("fire2/relu_squeeze1x1", n.conv("fire2/squeeze1x1", x, 4, 1))
    e1 = n.relu("fire2/relu_expand1x1", n.conv("fire2/expand1x1", sq, 8, 1))
    e3 = n.relu("fire2/relu_expand3x3", n.conv("fire2/expand3x3", sq, 8, 3, pad=1))
    x = n.concat("fire2/concat", [e1, e3])
    n.nb.layer("drop9", "Dropout", [x], [x])
    x = n.relu("relu_conv10", n.conv("conv10", x, 10, 1))
    x = n.pool("pool10", x, "AVE", global_=True)
    n.softmax("prob", x)  # a 4-D output: [1, 10, 1, 1]
    return n.nb


def resnet_bottleneck(v1: bool = False) -> NetBuilder:
    if v1:
        raise ValueError("BatchNorm and Scale do not exist in the V1 format")
    n = _Net("ResNet_bottleneck", False, 6)
    x = n.input("data", [1, 8, 10, 10])
    x = n.conv("conv1", x, 16, 3, pad=1, bias=False)
    x = n.relu("conv1_relu", n.bn_scale("conv1", x))
    sc = n.bn_scale("res2a_branch1", n.conv("res2a_branch1", x, 32, 1, stride=2, bias=False))
    a = n.conv("res2a_branch2a", x, 8, 1, stride=2, bias=False)
    a = n.relu("res2a_branch2a_relu", n.bn_scale("res2a_branch2a", a))
    a = n.conv("res2a_branch2b", a, 8, 3, pad=1, bias=False)
    a = n.relu("res2a_branch2b_relu", n.bn_scale("res2a_branch2b", a))
    a = n.bn_scale("res2a_branch2c", n.conv("res2a_branch2c", a, 32, 1, bias=False))
    n.nb.layer("res2a", "Eltwise", [sc, a], ["res2a"], eltwise_param={"coeff": [1.0, 0.5]})
    n.ch["res2a"] = 32
    x = n.relu("res2a_relu", "res2a")
    x = n.pool("pool5", x, "AVE", global_=True)
    x = n.ip("fc", x, 10, 32)
    n.softmax("prob", x)
    return n.nb


def activations(v1: bool = False) -> NetBuilder:
    """Every elementwise layer, Eltwise PROD/MAX, Slice, Deconvolution, dilation, LRN within
    channels."""
    n = _Net("activations", v1, 7)
    x = n.input("data", [1, 6, 9, 11])
    # rectangular kernel, per-axis stride and pad, dilation
    x = n.conv("conv_dilated", x, 8, 3, dilation=[2])
    x = n.relu("leaky", x, slope=0.1)
    n.nb.layer("slice", "Slice", [x], ["s1", "s2", "s3"],
               slice_param={"axis": 1, "slice_point": [2, 5]})
    n.ch.update(s1=2, s2=3, s3=3)
    n.nb.layer("sig", "Sigmoid", ["s1"], ["sig"])
    n.nb.layer("tanh", "TanH", ["s2"], ["tanh"])
    n.nb.layer("bnll", "BNLL", ["s3"], ["bnll"])
    n.nb.layer("abs", "AbsVal", ["s2"], ["abs"])
    n.nb.layer("power", "Power", ["s3"], ["power"],
               power_param={"power": 2.0, "scale": 0.5, "shift": 1.0})
    n.nb.layer("prod", "Eltwise", ["tanh", "abs"], ["prod"], eltwise_param={"operation": "PROD"})
    n.nb.layer("max", "Eltwise", ["bnll", "power"], ["max"], eltwise_param={"operation": "MAX"})
    n.ch.update(sig=2, prod=3, max=3)
    x = n.concat("cat", ["sig", "prod", "max"])
    # Deconvolution: weights [C_in, C_out / group, kh, kw]
    n.nb.layer("deconv", "Deconvolution", [x], ["deconv"],
               blobs=[n.w(8, 2, 4, 4, fan_in=16), n.b(4)],
               convolution_param={"num_output": 4, "kernel_size": [4], "stride": [2],
                                  "pad": [1], "group": 2})
    n.ch["deconv"] = 4
    y = n.conv("conv_hw", "deconv", 4, 3, stride=2, pad=1)
    n.nb.layer("lrn_within", "LRN", [y], ["lrn_within"],
               lrn_param={"local_size": 3, "alpha": 0.7, "beta": 0.75,
                          "norm_region": "WITHIN_CHANNEL"})
    n.softmax("prob", "lrn_within")
    return n.nb


def modern_layers(v1: bool = False) -> NetBuilder:
    """Layers of the new format only: PReLU, ELU, Permute, Reshape, Flatten, Softmax axis,
    Scale with num_axes, conv with kernel_h/kernel_w spellings; batch 2."""
    if v1:
        raise ValueError("PReLU, ELU, Permute and Reshape do not exist in the V1 format")
    n = _Net("modern", False, 8)
    x = n.input("data", [2, 4, 7, 9])
    n.nb.layer("conv_hw", "Convolution", [x], ["conv_hw"],
               blobs=[n.w(6, 4, 3, 2), n.b(6)],
               convolution_param={"num_output": 6, "kernel_h": 3, "kernel_w": 2,
                                  "stride_h": 1, "stride_w": 2, "pad_h": 2, "pad_w": 1})
    n.nb.layer("prelu", "PReLU", ["conv_hw"], ["conv_hw"],
               blobs=[n.rng.uniform(0.05, 0.5, 6).astype(np.float32)])
    n.nb.layer("elu", "ELU", ["conv_hw"], ["elu"], elu_param={"alpha": 0.7})
    n.nb.layer("scale_hw", "Scale", ["elu"], ["scale_hw"],
               blobs=[n.rng.uniform(0.5, 1.5, (6, 9)).astype(np.float32)],
               scale_param={"axis": 1, "num_axes": 2})
    n.nb.layer("pool_pad", "Pooling", ["scale_hw"], ["pool_pad"],
               pooling_param={"pool": "AVE", "kernel_size": 3, "stride": 2, "pad": 1})
    n.nb.layer("permute", "Permute", ["pool_pad"], ["permute"],
               permute_param={"order": [0, 2, 3, 1]})
    n.nb.layer("reshape", "Reshape", ["permute"], ["reshape"],
               reshape_param={"shape": {"dim": [0, -1, 6]}})
    n.nb.layer("sm_axis", "Softmax", ["reshape"], ["sm_axis"], softmax_param={"axis": 1})
    n.nb.layer("flatten", "Flatten", ["sm_axis"], ["flatten"])
    n.nb.layer("ip_axis", "InnerProduct", ["pool_pad"], ["ip_axis"],
               blobs=[n.w(5, 5 * 3), n.b(5)],
               inner_product_param={"num_output": 5, "axis": 2})
    n.nb.layer("prelu_shared", "PReLU", ["ip_axis"], ["prelu_shared"],
               blobs=[np.array([0.25], np.float32)], prelu_param={"channel_shared": True})
    return n.nb


def se_block(v1: bool = False) -> NetBuilder:
    """A squeeze-and-excitation block: global pool, two InnerProducts, Sigmoid, and a Scale
    whose scale is its second bottom (axis 0: one factor per image and channel)."""
    if v1:
        raise ValueError("Scale does not exist in the V1 format")
    n = _Net("SE_block", False, 9)
    x = n.input("data", [2, 8, 6, 6])
    x = n.relu("conv_relu", n.conv("conv", x, 16, 3, pad=1))
    sq = n.pool("squeeze", x, "AVE", global_=True)
    e = n.relu("fc1_relu", n.ip("fc1", sq, 4, 16))
    e = n.ip("fc2", e, 16, 4)
    n.nb.layer("gate", "Sigmoid", [e], ["gate"])
    n.nb.layer("excite", "Scale", [x, "gate"], ["excite"],
               scale_param={"axis": 0})
    n.ch["excite"] = 16
    x = n.pool("pool", "excite", "MAX", 2, 2)
    n.nb.layer("prob", "Softmax", [x], ["prob"])
    return n.nb


NETS: dict[str, Callable[[bool], NetBuilder]] = {
    "lenet": lenet, "cifar_quick": cifar_quick, "alexnet": alexnet, "inception": inception,
    "squeezenet": squeezenet, "resnet_bottleneck": resnet_bottleneck,
    "activations": activations, "modern_layers": modern_layers, "se_block": se_block,
}
"""Every test network by name."""

V1_NETS = ("lenet", "cifar_quick", "alexnet", "inception", "squeezenet", "activations")
"""The networks that also exist in the legacy V1 format."""
