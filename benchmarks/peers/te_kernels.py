"""TE versions of stdlib kernels, for MetaSchedule.

leirc's -O0 lowering (``leirc.lower.lower``) emits plain TIR loops without schedulable blocks,
which MetaSchedule's space generators cannot schedule, so the baseline tunes a TE ``compute``
of the same computation instead: the same shapes, the same intermediates (the padded copy of a
convolution or pooling, the row max and sum of a softmax, the mean and rstd of a layernorm),
the same argument order (inputs, then outputs) as the LEIR kernel. Each builder returns a
PrimFunc whose parameters are the kernel's inputs then outputs.
"""

from __future__ import annotations


def _matmul(m, k, n):
    from tvm import te

    A = te.placeholder((m, k), "float32", name="A")
    B = te.placeholder((k, n), "float32", name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return [A, B, C]


def gemm512():
    return _matmul(512, 512, 512)


def matmul_square():
    """stdlib/matmul_square.leir: the same 512^3 GEMM (the search matrix names rows by file)."""
    return _matmul(512, 512, 512)


def matmul_standard():
    return _matmul(256, 1024, 512)


def batched_matmul():
    from tvm import te

    A = te.placeholder((8, 128, 256), "float32", name="A")
    B = te.placeholder((8, 256, 512), "float32", name="B")
    r = te.reduce_axis((0, 256), name="k")
    C = te.compute((8, 128, 512), lambda b, i, j: te.sum(A[b, i, r] * B[b, r, j], axis=r), name="C")
    return [A, B, C]


def gemv():
    from tvm import te

    A = te.placeholder((128, 65536), "float32", name="A")
    X = te.placeholder((65536,), "float32", name="X")
    r = te.reduce_axis((0, 65536), name="k")
    Y = te.compute((128,), lambda m: te.sum(A[m, r] * X[r], axis=r), name="Y")
    return [A, X, Y]


def conv2d():
    from tvm import te, tirx

    X = te.placeholder((2, 16, 64, 64), "float32", name="X")
    W = te.placeholder((128, 16, 3, 3), "float32", name="W")
    Pd = te.compute((2, 16, 66, 66), lambda n, c, h, w: tirx.if_then_else(
        tirx.all(h >= 1, h < 65, w >= 1, w < 65), X[n, c, h - 1, w - 1], tirx.const(0.0, "float32")), name="Pd")
    c = te.reduce_axis((0, 16), name="c")
    p = te.reduce_axis((0, 3), name="p")
    q = te.reduce_axis((0, 3), name="q")
    C = te.compute((2, 128, 64, 64), lambda n, o, i, j: te.sum(Pd[n, c, i + p, j + q] * W[o, c, p, q],
                                                               axis=[c, p, q]), name="C")
    return [X, W, C]


def pointwise_conv2d():
    from tvm import te

    X = te.placeholder((4, 64, 64, 64), "float32", name="X")
    W = te.placeholder((128, 64, 1, 1), "float32", name="W")
    c = te.reduce_axis((0, 64), name="c")
    C = te.compute((4, 128, 64, 64), lambda n, o, h, w: te.sum(X[n, c, h, w] * W[o, c, 0, 0], axis=c), name="C")
    return [X, W, C]


def depthwise_conv2d():
    from tvm import te

    X = te.placeholder((4, 64, 128, 128), "float32", name="X")
    W = te.placeholder((64, 1, 3, 3), "float32", name="W")
    p = te.reduce_axis((0, 3), name="p")
    q = te.reduce_axis((0, 3), name="q")
    C = te.compute((4, 64, 126, 126), lambda n, c, i, j: te.sum(X[n, c, i + p, j + q] * W[c, 0, p, q],
                                                                axis=[p, q]), name="C")
    return [X, W, C]


def gemm_bias_relu():
    from tvm import te, tirx

    X = te.placeholder((128, 1024), "float32", name="X")
    W = te.placeholder((1024, 1024), "float32", name="W")
    Bias = te.placeholder((1024,), "float32", name="Bias")
    r = te.reduce_axis((0, 1024), name="k")
    Acc = te.compute((128, 1024), lambda i, j: te.sum(X[i, r] * W[j, r], axis=r), name="Acc")
    Y = te.compute((128, 1024), lambda i, j: tirx.max(Acc[i, j] + Bias[j], tirx.const(0.0, "float32")), name="Y")
    return [X, W, Bias, Y]


def softmax():
    from tvm import te, tirx

    X = te.placeholder((256, 24576), "float32", name="X")
    j1 = te.reduce_axis((0, 24576), name="j1")
    Rmax = te.compute((256,), lambda i: te.max(X[i, j1], axis=j1), name="Rmax")
    j2 = te.reduce_axis((0, 24576), name="j2")
    Rsum = te.compute((256,), lambda i: te.sum(tirx.exp(X[i, j2] - Rmax[i]), axis=j2), name="Rsum")
    Y = te.compute((256, 24576), lambda i, j: tirx.exp(X[i, j] - Rmax[i]) / Rsum[i], name="Y")
    return [X, Y]


def layernorm():
    from tvm import te, tirx

    X = te.placeholder((16, 16, 64, 64), "float32", name="X")
    W = te.placeholder((16, 64, 64), "float32", name="W")
    Bias = te.placeholder((16, 64, 64), "float32", name="Bias")
    axes = lambda t: [te.reduce_axis((0, 16), name=f"c{t}"), te.reduce_axis((0, 64), name=f"h{t}"),  # noqa: E731
                      te.reduce_axis((0, 64), name=f"w{t}")]
    c1, h1, w1 = axes(1)
    Sum = te.compute((16,), lambda n: te.sum(X[n, c1, h1, w1], axis=[c1, h1, w1]), name="Sum")
    Mean = te.compute((16,), lambda n: Sum[n] / tirx.const(65536.0, "float32"), name="Mean")
    c2, h2, w2 = axes(2)
    Sq = te.compute((16,), lambda n: te.sum((X[n, c2, h2, w2] - Mean[n]) * (X[n, c2, h2, w2] - Mean[n]),
                                           axis=[c2, h2, w2]), name="Sq")
    Rstd = te.compute((16,), lambda n: tirx.rsqrt(Sq[n] / tirx.const(65536.0, "float32")
                                                 + tirx.const(1e-5, "float32")), name="Rstd")
    Y = te.compute((16, 16, 64, 64), lambda n, c, h, w: (X[n, c, h, w] - Mean[n]) * Rstd[n] * W[c, h, w]
                   + Bias[c, h, w], name="Y")
    return [X, W, Bias, Y]


def maxpool2d():
    from tvm import te, tirx

    X = te.placeholder((8, 16, 128, 128), "float32", name="X")
    Pd = te.compute((8, 16, 130, 130), lambda n, c, h, w: tirx.if_then_else(
        tirx.all(h >= 1, h < 129, w >= 1, w < 129), X[n, c, h - 1, w - 1], tirx.min_value("float32")), name="Pd")
    p = te.reduce_axis((0, 4), name="p")
    q = te.reduce_axis((0, 4), name="q")
    C = te.compute((8, 16, 127, 127), lambda n, c, i, j: te.max(Pd[n, c, i + p, j + q], axis=[p, q]), name="C")
    return [X, C]


#: stdlib kernel name -> TE builder (the kernels MetaSchedule tunes)
TE_KERNELS = {f.__name__: f for f in (gemm512, matmul_square, matmul_standard, batched_matmul, gemv, conv2d, pointwise_conv2d,
                                      depthwise_conv2d, gemm_bias_relu, softmax, layernorm, maxpool2d)}

#: the ten representative kernels of issue #12's MetaSchedule column
MS_DEFAULT = ["gemm512", "batched_matmul", "gemv", "conv2d", "pointwise_conv2d", "depthwise_conv2d",
              "gemm_bias_relu", "softmax", "layernorm", "maxpool2d"]


def prim_func(name: str):
    from tvm import te

    return te.create_prim_func(TE_KERNELS[name]()).with_attr("global_symbol", "main")
