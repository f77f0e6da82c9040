"""Normalization layers: layer/group/instance/batch/RMS norm, normalize."""

from __future__ import annotations

import math

from ...lang import ast as A
from .. import builder as B
from ..errors import UnsupportedOpError
from ..values import TensorRef, norm_dim
from .base import OpsBase
from .common import square_expr, stats_dtype
from .registry import function


#: torch.finfo(dtype).eps, rms_norm's default epsilon
_MACHINE_EPS = {"f64": 2.220446049250313e-16, "f32": 1.1920928955078125e-07, "f16": 0.0009765625, "bf16": 0.0078125}


class NormOps(OpsBase):
    # ------------------------------------------------------------------
    # normalization

    def _moments(self, out_shape, red_shape, gather, eps, h, dtype):
        """Mean and 1/sqrt(var + eps) over ``red_shape`` for every ``out_shape`` index;
        ``gather(o, r)`` is the element. Two passes (mean, then squared deviations), in
        ``dtype`` (:func:`stats_dtype` of the input)."""
        n = math.prod(red_shape)
        s = self.b.reduce(f"{h}_sum", out_shape, red_shape, gather, "+", dtype=dtype)
        mean = self.b.assign(f"{h}_mean", out_shape, lambda o: B.div(A.Access(s, dtype, "g", tuple(o)),
                                                                      B.fconst(float(n))), dtype)
        mref = TensorRef(mean, out_shape, dtype)
        q = self.b.reduce(f"{h}square_expr", out_shape, red_shape, lambda o, r: square_expr(B.sub(gather(o, r), mref.at(o))), "+",
                          dtype=dtype)
        rstd = self.b.assign(f"{h}_rstd", out_shape, lambda o: B.call("rsqrt", B.add(
            B.div(A.Access(q, dtype, "g", tuple(o)), B.fconst(float(n))), B.fconst(float(eps)))), dtype)
        return mref, TensorRef(rstd, out_shape, dtype)

    def _affine_out(self, x, mean, rstd, stat_idx, w, b, w_idx):
        def fn(idx):
            si = stat_idx(idx)
            e = B.mul(B.sub(x.at(idx), mean.at(si)), rstd.at(si))
            if w is not None:
                e = B.mul(e, w.at(w_idx(idx)))
            if b is not None:
                e = B.add(e, b.at(w_idx(idx)))
            return e

        name = self.b.assign(self.imp.hint, x.shape, fn, x.dtype)
        return TensorRef(name, x.shape, x.dtype)

    @function('layer_norm')
    def f_layer_norm(self, input, normalized_shape, weight=None, bias=None, eps=1e-5):
        x = input
        k = len(normalized_shape) if isinstance(normalized_shape, (list, tuple)) else 1
        outer = list(x.shape[:-k])
        red = list(x.shape[-k:])
        no = len(outer)
        mean, rstd = self._moments(outer, red, lambda o, r: x.at(list(o) + list(r)), eps, self.imp.hint,
                                   stats_dtype(x))
        return self._affine_out(x, mean, rstd, lambda idx: idx[:no], weight, bias, lambda idx: idx[no:])

    @function('group_norm')
    def f_group_norm(self, input, num_groups, weight=None, bias=None, eps=1e-5):
        x = input
        n, c = x.shape[:2]
        g = int(num_groups)
        cg = c // g
        sp = list(x.shape[2:])
        mean, rstd = self._moments([n, g], [cg] + sp, lambda o, r: x.at(
            [o[0], B.iadd(B.imul(o[1], cg), r[0])] + list(r[1:])), eps, self.imp.hint, stats_dtype(x))
        return self._affine_out(x, mean, rstd, lambda idx: [idx[0], B.ifloordiv(idx[1], cg)], weight, bias,
                                lambda idx: [idx[1]])

    @function('instance_norm')
    def f_instance_norm(self, input, running_mean=None, running_var=None, weight=None, bias=None,
                        use_input_stats=True, momentum=0.1, eps=1e-5):
        x = input
        if not use_input_stats:
            return self._norm_running(x, running_mean, running_var, weight, bias, eps)
        n, c = x.shape[:2]
        sp = list(x.shape[2:])
        mean, rstd = self._moments([n, c], sp, lambda o, r: x.at(list(o) + list(r)), eps, self.imp.hint,
                                   stats_dtype(x))
        return self._affine_out(x, mean, rstd, lambda idx: idx[:2], weight, bias, lambda idx: [idx[1]])

    @function('batch_norm')
    def f_batch_norm(self, input, running_mean, running_var, weight=None, bias=None, training=False,
                     momentum=0.1, eps=1e-5):
        x = input
        if not training and running_mean is not None:
            return self._norm_running(x, running_mean, running_var, weight, bias, eps)
        n, c = x.shape[:2]
        sp = list(x.shape[2:])
        mean, rstd = self._moments([c], [n] + sp, lambda o, r: x.at([r[0], o[0]] + list(r[1:])), eps, self.imp.hint,
                                   stats_dtype(x))
        return self._affine_out(x, mean, rstd, lambda idx: [idx[1]], weight, bias, lambda idx: [idx[1]])

    def _norm_running(self, x, rm, rv, w, b, eps):
        c = x.shape[1]
        dt = stats_dtype(x, rv)
        rstd = self.b.assign(f"{self.imp.hint}_rstd", [c], lambda o: B.call("rsqrt", B.add(rv.at(o), B.fconst(float(eps)))),
                             dt)
        return self._affine_out(x, rm, TensorRef(rstd, [c], dt), lambda idx: [idx[1]], w, b, lambda idx: [idx[1]])

    @function('rms_norm')
    def f_rms_norm(self, input, normalized_shape, weight=None, eps=None):
        x = input
        if eps is None:  # PyTorch: torch.finfo(input.dtype).eps
            eps = _MACHINE_EPS.get(x.dtype, _MACHINE_EPS["f32"])
        k = len(normalized_shape) if isinstance(normalized_shape, (list, tuple)) else 1
        outer = list(x.shape[:-k])
        red = list(x.shape[-k:])
        no = len(outer)
        n = math.prod(red)
        h = self.imp.hint
        dt = stats_dtype(x)
        s = self.b.reduce(f"{h}square_expr", outer, red, lambda o, r: square_expr(x.at(list(o) + list(r))), "+",
                          dtype=dt)
        r = self.b.assign(f"{h}_rstd", outer, lambda o: B.call("rsqrt", B.add(
            B.div(A.Access(s, dt, "g", tuple(o)), B.fconst(float(n))), B.fconst(float(eps)))), dt)
        rr = TensorRef(r, outer, dt)

        def fn(idx):
            e = B.mul(x.at(idx), rr.at(idx[:no]))
            if weight is not None:
                e = B.mul(e, weight.at(idx[no:]))
            return e

        name = self.b.assign(h, x.shape, fn, x.dtype)
        return TensorRef(name, x.shape, x.dtype)

    @function('normalize')
    def f_normalize(self, input, p=2.0, dim=1, eps=1e-12, out=None):
        x = input
        d = norm_dim(dim, x.ndim)
        if p in (2, 2.0):
            s = self.reduce(x, [d], True, "+", term=square_expr, hint=f"{self.imp.hint}square_expr")
            return self.ew([x, s], lambda a, q: B.div(a, B.call("max", B.call("sqrt", q), B.fconst(float(eps)))))
        if p in (1, 1.0):
            s = self.reduce(x, [d], True, "+", term=lambda e: B.call("abs", e), hint=f"{self.imp.hint}_l1")
            return self.ew([x, s], lambda a, q: B.div(a, B.call("max", q, B.fconst(float(eps)))))
        raise UnsupportedOpError(f"normalize with p={p}")
