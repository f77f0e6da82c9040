"""Operator coverage of the PyTorch frontend: small models import, check clean and verify
against PyTorch (reference interpreter); unsupported operators and untraceable models give
clear errors; the reduction split plan and the naming rules."""

from __future__ import annotations

import math
import textwrap

import pytest

torch = pytest.importorskip("torch")

from leirc.frontend import FrontendError, TraceError, UnsupportedOpError, import_model, verify_against_torch  # noqa: E402
from leirc.frontend import builder as B  # noqa: E402
from leirc.lang.checker import check_text  # noqa: E402

TEMPLATE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, {args}):
{body}


def get_inputs():
{inputs}


def get_init_inputs():
    return []
'''


def write_model(tmp_path, name, init, args, body, inputs):
    src = TEMPLATE.format(init=textwrap.indent(textwrap.dedent(init).strip() or "pass", " " * 8), args=args,
                          body=textwrap.indent(textwrap.dedent(body).strip(), " " * 8),
                          inputs=textwrap.indent(textwrap.dedent(inputs).strip(), " " * 4))
    p = tmp_path / f"{name}.py"
    p.write_text(src)
    return p


def import_and_verify(path, seeds=(0, 1)):
    res = import_model(str(path))
    cf = check_text(res.text)
    assert cf.ok, [str(d) for d in cf.diagnostics if d.is_error]
    v = verify_against_torch(str(path), res.text, res.weights, seeds=seeds)
    assert v.ok, v.summary() + "\n" + res.text
    return res


R = "return [torch.randn(2, 3, 4, 5)]"
R2 = "return [torch.randn(4, 6), torch.randn(4, 6)]"

# name -> (init, forward args, forward body, get_inputs body)
CASES = {
    "reshape_split_merge": ("", "x", "return x.reshape(6, 20).view(2, 3, 20)[:, :, 3:17:2].flatten(1) * 2", R),
    "reshape_odd_groups": ("", "x", "return x.reshape(4, 30).reshape(5, 24).reshape(2, 60) + 1", R),
    "index_none_ellipsis": ("", "x", "return x[..., None, 1, -2:] + x[1, None, ..., 0:1, 2]", R),
    "cat_stack_split": ("", "x", "a, b = torch.split(x, [1, 2], dim=1)\nc = torch.chunk(x, 2, dim=3)\n"
                                 "return torch.cat([b, a, a * 2], dim=1).sum() + torch.stack([c[0][..., :2], c[1]], dim=0).mean()",
                        R),
    "flip_roll_repeat_expand": ("", "x", "y = torch.flip(x, dims=[1, 3]) + torch.roll(x, shifts=2, dims=3)\n"
                                         "return y[:, :1].repeat(1, 2, 1, 1) * x[:, :1].expand(2, 2, 4, 5)", R),
    "permute_movedim_transpose": ("", "x", "return x.permute(3, 1, 0, 2).contiguous().transpose(0, 2) - torch.movedim(x, 0, 2).permute(2, 0, 3, 1)", R),
    "batched_broadcast_matmul": ("", "a, b", "return torch.matmul(a, b.transpose(-1, -2)) + (a @ torch.ones(5, 2)[:, 0])[..., None]",
                                 "return [torch.randn(3, 1, 4, 5), torch.randn(2, 6, 5)]"),
    "matmul_vector_cases": ("", "a, v", "return torch.matmul(v, a.t()).sum() + torch.dot(v, v) + torch.mv(a, v).mean()",
                            "return [torch.randn(7, 5), torch.randn(5)]"),
    "einsum_implicit_and_outer": ("", "a, b", "return torch.einsum('ij,jk', a, b).sum(0) + torch.einsum('i,j->ij', a[0], b[1]).sum(1)[:1]",
                                  "return [torch.randn(4, 5), torch.randn(5, 4)]"),
    "addmm_baddbmm": ("self.bias = nn.Parameter(torch.randn(6))", "a, b",
                      "return torch.addmm(self.bias, a, b, beta=0.5, alpha=2.0) + torch.baddbmm(a[None], a[None], b[None] * 0, beta=1.0)[0, :, :1]",
                      "return [torch.randn(6, 6), torch.randn(6, 6)]"),
    "pad_triu_tril": ("", "x", "return F.pad(torch.triu(x, diagonal=1), (1, 2, 0, 1), value=0.5) + F.pad(torch.tril(x, -1), (2, 1, 1, 0))",
                      "return [torch.randn(5, 5)]"),
    "where_masked_fill_compare": ("", "a, b", "m = a > b\nx = torch.where(m, a, b * 2)\nreturn x.masked_fill(a < -0.5, -1.0) + (a >= 0).float()",
                                  R2),
    "clamp_tensor_bounds_pow": ("", "a, b", "return torch.clamp(a, min=-b.abs(), max=b.abs()) + torch.pow(a.abs() + 1, 1.7) + a ** 3 - 2 ** b",
                                R2),
    "arith_scalars_python": ("", "a, b", "n = a.size(1)\nreturn (1 - a) / (b.abs() + 1) * n - a // 0.7 + torch.remainder(a, 0.5) + torch.fmod(a, 0.3) - torch.rsub(a, 1.0, alpha=2)",
                             R2),
    "inplace_ops": ("", "a, b", "a = a * 1\na += b\na.relu_()\nc = a.clone()\nc.mul_(2)\nreturn a + c", R2),
    "cumsum_cumprod": ("", "x", "return torch.cumsum(x, dim=1) + torch.cumprod(x * 0.5, dim=0)", "return [torch.randn(4, 7)]"),
    "var_std_logsumexp": ("", "x", "return torch.var(x, dim=1) + torch.std(x, dim=1, unbiased=False) + torch.logsumexp(x, dim=1) + x.var()",
                          "return [torch.randn(4, 9)]"),
    "prod_amin_min_max_binary": ("", "a, b", "return torch.prod(a * 0.5 + 1, dim=1, keepdim=True) + torch.amin(a, dim=(0, 1)) + torch.min(a, b) - torch.maximum(a, b) + a.max()",
                                 R2),
    "max_min_values_named": ("", "x", "return torch.max(x, 1).values + x.min(dim=0, keepdim=True).values.sum() + x.sum(0)[:4]",
                             "return [torch.randn(4, 6)]"),
    "concrete_int_argument": ("", "x, k: int", "return x * k + x.sum(dim=1, keepdim=True) / k",
                              "return [torch.randn(4, 5), 3]"),
    "normalize_norm_p1": ("", "x", "return F.normalize(x, dim=1) + torch.norm(x, p=1, dim=0)", "return [torch.randn(4, 6)]"),
    "pool_variants": ("self.p1 = nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True)\n"
                      "self.p2 = nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)\n"
                      "self.p3 = nn.AdaptiveAvgPool2d((3, 2))\nself.p4 = nn.AdaptiveMaxPool2d(1)\nself.p5 = nn.AdaptiveMaxPool2d((4, 3))",
                      "x", "return self.p1(x).sum() + self.p2(x) + self.p3(x[:, :, :5, :4]).sum() + self.p4(x) + self.p5(x[..., :5]).mean()",
                      "return [torch.randn(2, 3, 6, 6)]"),
    "pool_1d_3d": ("", "x", "y = F.max_pool1d(x.flatten(2), 4, 2, 1) \nz = F.avg_pool3d(x[:, None], 2)\nreturn y.sum() + z.sum(dim=(1, 2, 3, 4))",
                   "return [torch.randn(2, 4, 6, 6)]"),
    "conv_same_unbatched_conv1d": ("self.c = nn.Conv2d(3, 4, (3, 2), padding='same', dilation=(1, 2))\n"
                                   "self.d = nn.Conv1d(3, 6, 3, groups=3, padding=2, bias=False)",
                                   "x", "return self.c(x).sum() + self.c(x[0]).sum(0) + self.d(x.flatten(2)).mean()",
                                   "return [torch.randn(2, 3, 5, 6)]"),
    "conv_transpose_variants": ("self.t1 = nn.ConvTranspose1d(4, 6, 3, stride=3, padding=1, dilation=2, groups=2)\n"
                                "self.t2 = nn.ConvTranspose2d(4, 2, (2, 3), stride=(2, 1), padding=(0, 1), output_padding=(1, 0))",
                                "x", "return self.t1(x.flatten(2)).sum() + self.t2(x).sum(1)",
                                "return [torch.randn(2, 4, 3, 4)]"),
    "norm_variants": ("self.i = nn.InstanceNorm1d(4, affine=True)\nself.ln = nn.LayerNorm(5, elementwise_affine=False)\n"
                      "self.bn = nn.BatchNorm1d(4)\nself.bn.eval()",
                      "x", "y = F.rms_norm(x, (5,), eps=1e-6)\nreturn self.i(x) + self.ln(x) + y + self.bn(x) + F.group_norm(x, 2)",
                      "return [torch.randn(3, 4, 5)]"),
    "losses_a": ("", "a, b", "return F.l1_loss(a, b) + F.huber_loss(a, b, delta=0.5) + F.smooth_l1_loss(a, b, reduction='sum', beta=0.5) "
                             "+ F.mse_loss(a, b, reduction='none').mean() + F.soft_margin_loss(a, b.sign())",
                 R2),
    "losses_b": ("", "a, b, y", "return F.cosine_embedding_loss(a, b, y, margin=0.1) + F.hinge_embedding_loss(a, y[:, None].expand(4, 6)) "
                                "+ F.margin_ranking_loss(a[:, 0], b[:, 0], y) + F.pairwise_distance(a, b, p=1).sum() "
                                "+ F.triplet_margin_loss(a, b, a.flip(0), swap=True)",
                 "return [torch.randn(4, 6), torch.randn(4, 6), torch.randint(0, 2, (4,)).float() * 2 - 1]"),
    "losses_c": ("", "p, t, lab", "return F.binary_cross_entropy(p, t) + F.binary_cross_entropy_with_logits(p * 4 - 2, t) "
                                  "+ F.cross_entropy(p, lab) + F.kl_div(p.log(), t, reduction='sum', log_target=False)",
                 "return [torch.rand(4, 5) * 0.9 + 0.05, torch.rand(4, 5), torch.randint(0, 5, (4,))]"),
    "activations_rest": ("self.pr = nn.PReLU(6)", "x",
                         "return F.celu(x, 0.7) + F.threshold(x, 0.1, -2.0) + F.softshrink(x) + F.hardshrink(x, 0.3) "
                         "+ F.logsigmoid(x) + F.tanhshrink(x) + F.relu6(x * 4) + F.hardsigmoid(x) + F.mish(x) + self.pr(x) "
                         "+ F.softmin(x, dim=0) + F.log_softmax(x, dim=0) + torch.erf(x) + torch.sign(x) + torch.expm1(x) "
                         "+ torch.log1p(x.abs()) + torch.rsqrt(x.abs() + 1) + torch.reciprocal(x.abs() + 1) + torch.square(x) "
                         "+ torch.floor(x) + torch.ceil(x) + torch.trunc(x) + F.softplus(x, beta=2.0, threshold=1.0)",
                         "return [torch.randn(4, 6) * 2]"),
    "sdpa_masks": ("", "q, k, v, m", "a = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n"
                                     "b = F.scaled_dot_product_attention(q, k, v, attn_mask=m > 0, scale=0.3)\n"
                                     "c = F.scaled_dot_product_attention(q, k, v, attn_mask=m)\nreturn a + b + c",
                   "m = torch.randn(5, 5)\nm[:, 0] = 1.0\n"
                   "return [torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4), m]"),
    "tuple_outputs_and_views": ("", "a, b", "return a.t(), a + b, (a + b)[0]", R2),
    "zeros_ones_like_full": ("", "a", "return torch.zeros_like(a) + torch.ones_like(a) * 2 + torch.full_like(a, 0.5) + a.new_zeros(4, 6)",
                             "return [torch.randn(4, 6)]"),
    "diag_and_diagonal": ("", "a", "return torch.diag(a[0]) + torch.diag(a[:, :4]).sum() + torch.diagonal(a[:, :4], 1).sum()",
                          "return [torch.randn(4, 6)]"),
    "functional_linear_bilinear": ("self.w = nn.Parameter(torch.randn(3, 6))\nself.bl = nn.Bilinear(6, 6, 2)", "a, b",
                                   "return F.linear(a, self.w).sum(1, keepdim=True) + self.bl(a, b)", R2),
    "int_input_cast": ("", "a, i", "return a * i.float() + i.to(torch.float32).sum()",
                       "return [torch.randn(4, 6), torch.randint(0, 9, (4, 6))]"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_case(tmp_path, name):
    init, args, body, inputs = CASES[name]
    import_and_verify(write_model(tmp_path, name, init, args, body, inputs))


def test_long_sum_is_split_into_partial_sums(tmp_path):
    p = write_model(tmp_path, "bigmean", "", "x", "return x.mean()", "return [torch.rand(64, 1000)]")
    res = import_and_verify(p)
    assert "Mean_sum_part^{f32,g}" in res.text  # 64000 terms: per-row partial sums first
    p = write_model(tmp_path, "smallmean", "", "x", "return x.mean()", "return [torch.rand(64, 60)]")
    res = import_model(str(p))
    assert "_part" not in res.text


def test_names_and_header(tmp_path):
    p = write_model(tmp_path, "names", "self.layers = nn.Sequential(nn.Linear(6, 6), nn.ReLU())", "input_tensor",
                    "return self.layers(input_tensor)", "return [torch.randn(4, 6)]")
    res = import_and_verify(p)
    assert "\\kernel model(Input_tensor: f32[4, 6], Layers_0_weight: f32[6, 6], Layers_0_bias: f32[6]) -> (Y: f32[4, 6])" in res.text
    assert set(res.weights) == {"Layers_0_weight", "Layers_0_bias"}
    assert res.meta["params"][0]["qualname"] == "layers.0.weight"
    assert "L^{" in res.text and "P^{" not in res.text  # naive serial loops only


# ---------------------------------------------------------------------------
# errors


def test_unsupported_op_names_op_and_line(tmp_path):
    p = write_model(tmp_path, "argmax", "", "x", "y = x + 1\nreturn torch.argmax(y, dim=1)", "return [torch.randn(4, 6)]")
    with pytest.raises(UnsupportedOpError) as ei:
        import_model(str(p))
    msg = str(ei.value)
    assert msg.startswith("argmax.py:14: `return torch.argmax(y, dim=1)`: ")
    assert "argmax" in msg


def test_unsupported_module_and_indices(tmp_path):
    p = write_model(tmp_path, "lstm", "self.rnn = nn.LSTM(6, 4)", "x", "return self.rnn(x)[0]",
                    "return [torch.randn(3, 2, 6)]")
    with pytest.raises(UnsupportedOpError, match=r"unsupported module torch.nn.LSTM \(rnn\)"):
        import_model(str(p))
    p = write_model(tmp_path, "idx", "", "x", "v, i = torch.max(x, dim=1)\nreturn v + i", "return [torch.randn(4, 6)]")
    with pytest.raises(UnsupportedOpError, match="indices result of max"):
        import_model(str(p))
    p = write_model(tmp_path, "drop", "self.d = nn.Dropout(0.2)", "x", "return self.d(x)", "return [torch.randn(4, 6)]")
    with pytest.raises(UnsupportedOpError, match="dropout"):
        import_model(str(p))


def test_untraceable_model_is_a_clear_error(tmp_path):
    p = write_model(tmp_path, "ctrl", "", "x", "if x.sum() > 0:\n    return x\nreturn -x", "return [torch.randn(4, 6)]")
    with pytest.raises(TraceError, match="torch.fx cannot trace Model.forward"):
        import_model(str(p))


def test_bad_model_file(tmp_path):
    p = tmp_path / "boom.py"
    p.write_text("raise RuntimeError('nope')\n")
    with pytest.raises(FrontendError, match="executing the model file failed: RuntimeError: nope"):
        import_model(str(p))


# ---------------------------------------------------------------------------
# units


@pytest.mark.parametrize("sizes", [[4000], [5000], [65536], [2048, 2048], [3, 65536], [65521], [16, 64, 64],
                                   [7, 9, 11, 13], [100003]])
def test_plan_split_covers_the_domain(sizes):
    plan = B.plan_split(sizes)
    n = math.prod(sizes)
    if n <= B.SPLIT_THRESHOLD:
        assert plan.outer == 0
        return
    assert 0 < plan.outer < len(plan.axes)
    inner = math.prod(plan.axes[plan.outer:])
    outer = math.prod(plan.axes[: plan.outer])
    assert inner * outer >= n
    assert max(inner, outer) <= max(B.SPLIT_THRESHOLD, 4 * math.isqrt(n)) * 4
    # every index of every dimension is reached exactly once (guarded where ragged)
    import itertools

    if n <= 70000:
        seen = {}
        for pt in itertools.product(*[range(a) for a in plan.axes]):
            idx = tuple(sum(pt[a] * k for a, k in plan.index[d]) for d in range(len(sizes)))
            if all(i < s for i, s in zip(idx, sizes)):
                seen[idx] = seen.get(idx, 0) + 1
            else:
                assert any(plan.guard)
        assert len(seen) == n and set(seen.values()) == {1}


def test_sanitize_names():
    assert B.sanitize("linear.weight") == "Linear_weight"
    assert B.sanitize("0.conv__1") == "T0_conv_1"
    assert B.sanitize("_x") == "X"
    names = B.Names()
    assert [names.fresh("relu"), names.fresh("Relu"), names.fresh("relu")] == ["Relu", "Relu_2", "Relu_3"]


# -- precision by dtype: f64 stays f64, f16/bf16 accumulate in f32 (frontend/README.md) ----

_STATS_BODY = ("y = torch.softmax(self.ln(x), dim=1) + x.mean(dim=1, keepdim=True) + x.var(dim=1, keepdim=True)\n"
               "return y + torch.logsumexp(x, dim=1, keepdim=True) + F.rms_norm(x, (x.shape[1],))")


def _intermediate_dtypes(text: str) -> set:
    """The dtypes of the tensors the kernel body writes (intermediates and outputs)."""
    import re

    body = text.split("\\kernel", 1)[1]
    return set(re.findall(r"\b[A-Z]\w*\^\{(\w+),g\}[^=;]*=", body))


def test_f64_models_keep_every_statistic_in_f64(tmp_path):
    p = write_model(tmp_path, "stats64", "self.ln = nn.LayerNorm(5000).double()", "x", _STATS_BODY,
                    "return [torch.randn(3, 5000, dtype=torch.float64)]")
    res = import_and_verify(p, seeds=(0,))
    assert _intermediate_dtypes(res.text) == {"f64"}, res.text
    assert "_part^{f64" in res.text  # the long sums are split, in f64


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_half_precision_models_accumulate_in_f32_and_round_at_the_use(tmp_path, dt):
    # no parameters: the importer cannot read bf16 weights yet
    body = _STATS_BODY.replace("self.ln(x)", "F.layer_norm(x, (x.shape[1],))")
    p = write_model(tmp_path, f"stats_{dt}", "", "x",
                    body + " + x.sum(dim=1, keepdim=True) + (x @ x.T).sum(dim=1, keepdim=True)",
                    f"return [torch.randn(3, 256).to(torch.{dt})]")
    res = import_and_verify(p, seeds=(0,))
    leir = {"float16": "f16", "bfloat16": "bf16"}[dt]
    for acc in ("Layer_norm_sum", "Layer_norm_rstd", "Softmax_sum", "Mean_sum", "Var_sum", "Rms_norm_rstd", "Matmul"):
        assert f"{acc}^{{f32,g}}" in res.text, (acc, res.text)
    assert f"Y^{{{leir},g}}" in res.text
