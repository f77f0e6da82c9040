"""Property test: random small compositions (2-4 operators: element-wise with broadcasting,
activations, reductions, softmax, matmul, views, layer norm) on random small shapes import,
check clean and verify against PyTorch (reference interpreter, two input seeds)."""

from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from leirc.frontend import import_model, verify_against_torch  # noqa: E402
from leirc.lang.checker import check_text  # noqa: E402

UNARY = ["torch.relu({t})", "torch.sigmoid({t})", "torch.tanh({t})", "F.gelu({t})", "F.gelu({t}, approximate='tanh')",
         "F.silu({t})", "torch.abs({t})", "-{t}", "{t} * 1.5", "{t} + 0.25", "{t} / 3.0", "{t} ** 2",
         "torch.clamp({t}, -0.5, 0.5)", "F.leaky_relu({t}, 0.2)", "F.softplus({t})", "F.hardswish({t})",
         "F.elu({t})", "torch.exp(torch.tanh({t}))", "F.mish({t})", "F.hardtanh({t})", "1.0 - {t}"]
BINARY = ["{t} + {u}", "{t} - {u}", "{t} * {u}", "{t} / ({u}.abs() + 1.0)", "torch.maximum({t}, {u})",
          "torch.where({u} > 0, {t}, {u})"]
_counter = itertools.count()


@st.composite
def programs(draw):
    rank = draw(st.integers(1, 3))
    shape = [draw(st.integers(1, 5)) for _ in range(rank)]
    inputs = [("x", list(shape))]
    lines = []
    cur, cur_shape = "x", list(shape)
    for k in range(draw(st.integers(2, 4))):
        kinds = ["unary", "binary", "matmul"]
        if len(cur_shape) >= 1:
            kinds += ["softmax", "reduce_keep"]
        if len(cur_shape) >= 2:
            kinds += ["reduce", "transpose", "flatten"]
        if cur_shape and cur_shape[-1] > 1:
            kinds.append("layernorm")
        kind = draw(st.sampled_from(kinds))
        t = cur
        if kind == "unary":
            expr, shp = draw(st.sampled_from(UNARY)).format(t=t), cur_shape
        elif kind == "binary":
            # a new input broadcastable to the current shape (some dims 1, maybe fewer dims)
            drop = draw(st.integers(0, len(cur_shape)))
            ushape = [s if draw(st.booleans()) else 1 for s in cur_shape[drop:]] or [1]
            u = f"in{len(inputs)}"
            inputs.append((u, ushape))
            expr = draw(st.sampled_from(BINARY)).format(t=t, u=u)
            shp = [max(a, b) for a, b in zip(cur_shape, [1] * (len(cur_shape) - len(ushape)) + ushape)] \
                if len(ushape) <= len(cur_shape) else ushape
        elif kind == "matmul":
            m = draw(st.integers(1, 5))
            u = f"in{len(inputs)}"
            inputs.append((u, [cur_shape[-1] if cur_shape else 1, m]))
            expr = f"torch.matmul({t}, {u})" if cur_shape else f"{t} * {u}"
            shp = cur_shape[:-1] + [m] if cur_shape else [1, m]
        elif kind == "softmax":
            d = draw(st.integers(0, len(cur_shape) - 1))
            fn = draw(st.sampled_from(["torch.softmax", "torch.log_softmax"]))
            expr, shp = f"{fn}({t}, dim={d})", cur_shape
        elif kind in ("reduce", "reduce_keep"):
            d = draw(st.integers(0, len(cur_shape) - 1))
            fn = draw(st.sampled_from(["sum", "mean", "amax", "amin"]))
            keep = kind == "reduce_keep"
            expr = f"{t}.{fn}(dim={d}, keepdim={keep})"
            shp = [1 if i == d else s for i, s in enumerate(cur_shape)] if keep else \
                [s for i, s in enumerate(cur_shape) if i != d]
        elif kind == "transpose":
            expr = f"{t}.transpose(0, -1)"
            shp = list(cur_shape)
            shp[0], shp[-1] = shp[-1], shp[0]
        elif kind == "flatten":
            expr = f"{t}.reshape({cur_shape[0]}, -1)"
            shp = [cur_shape[0], int(torch.tensor(cur_shape[1:]).prod())]
        else:  # layernorm over the last dim, with a random affine (so that a later sum does not cancel to 0)
            w, b = f"in{len(inputs)}", f"in{len(inputs) + 1}"
            inputs += [(w, [cur_shape[-1]]), (b, [cur_shape[-1]])]
            expr, shp = f"F.layer_norm({t}, ({cur_shape[-1]},), {w}, {b})", cur_shape
        cur = f"t{k}"
        lines.append(f"{cur} = {expr}")
        cur_shape = list(shp)
    lines.append(f"return {cur}")
    return inputs, lines


def render(inputs, lines) -> str:
    args = ", ".join(n for n, _ in inputs)
    body = "\n".join("        " + ln for ln in lines)
    ins = ", ".join(f"torch.randn({', '.join(map(str, s))})" for _, s in inputs)
    return (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
        "class Model(nn.Module):\n    def forward(self, " + args + "):\n" + body + "\n\n\n"
        "def get_inputs():\n    return [" + ins + "]\n\n\ndef get_init_inputs():\n    return []\n")


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(programs())
def test_random_compositions_verify_against_torch(tmp_path, prog):
    inputs, lines = prog
    src = render(inputs, lines)
    path = tmp_path / f"prop_{next(_counter)}.py"
    path.write_text(src)
    res = import_model(str(path))
    assert check_text(res.text).ok, res.text
    # Random compositions of randn data can cancel (a sum of maxima of a matmul ending near 0),
    # where two correct f32 programs with different summation orders differ by more than the
    # strict rule allows; translation bugs give O(1) errors, so a 10x looser rule is used here
    # (the workload suite is held to the strict rule).
    v = verify_against_torch(str(path), res.text, res.weights, seeds=(0, 1), rtol=1e-3, norm_tol=1e-4)
    assert v.ok, f"{v.summary()}\n--- model ---\n{src}\n--- LEIR ---\n{res.text}"
