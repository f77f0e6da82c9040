"""Reductions, statistics, norms, scans and softmax-like operators."""

from __future__ import annotations

import math

from ...lang import ast as A
from .. import builder as B
from .. import values as Vs
from ..errors import UnsupportedOpError
from ..values import ExprVal, TensorRef, Val, bcast_at, norm_dim
from .base import OpsBase
from .common import Poison, ValuesIndices, accumulator_dtype, drop_dims, square_expr, stats_dtype
from .registry import function


class ReduceOps(OpsBase):
    # ------------------------------------------------------------------
    # reductions

    @function('sum')
    def f_sum(self, input, dim=None, keepdim=False, *, dtype=None):
        if isinstance(dim, bool):  # sum(x, keepdim) misuse
            raise UnsupportedOpError("sum with a bool dim")
        # the node's dtype rounds the accumulator once where the sum is used (f16 sums in f32)
        dt = accumulator_dtype(self.imp.out_dtype())
        return self.reduce(input, dim, keepdim, "+", dtype=dt)

    @function('nansum')
    def f_nansum(self, input, dim=None, keepdim=False, *, dtype=None):
        return self.reduce(input, dim, keepdim, "+",
                           term=lambda e: B.select(B.cmp("!=", e, e), B.fconst(0.0), e))

    @function('mean')
    def f_mean(self, input, dim=None, keepdim=False, *, dtype=None):
        dims = self._full_reduce_shape(input, dim, keepdim)
        n = math.prod(input.shape[d] for d in dims)
        s = self.reduce(input, dims, keepdim, "+", hint=f"{self.imp.hint}_sum", dtype=stats_dtype(input))
        return self.scalar_div(s, n)

    @function('prod')
    def f_prod(self, input, dim=None, keepdim=False, *, dtype=None):
        return self.reduce(input, dim, keepdim, "*")

    @function('amax')
    def f_amax(self, input, dim=(), keepdim=False):
        return self.reduce(input, dim if dim != () else None, keepdim, "max")

    @function('amin')
    def f_amin(self, input, dim=(), keepdim=False):
        return self.reduce(input, dim if dim != () else None, keepdim, "min")

    def _minmax(self, op, input, dim=None, keepdim=False, other=None):
        if isinstance(dim, Val):
            other, dim = dim, None
        if other is not None:
            return self.ew([input, other], lambda a, b: B.call(op, a, b))
        if dim is None:
            return self.reduce(input, None, False, op)
        vals = self.reduce(input, dim, keepdim, op, hint=self.imp.hint + "_values")
        return ValuesIndices((vals, Poison(vals.shape, f"the indices result of {op}(x, dim) (argument positions)")))

    @function('max')
    def f_max(self, input, dim=None, keepdim=False, *, other=None):
        return self._minmax("max", input, dim, keepdim, other)

    @function('min')
    def f_min(self, input, dim=None, keepdim=False, *, other=None):
        return self._minmax("min", input, dim, keepdim, other)

    @function('argmax')
    def f_argmax(self, input, dim=None, keepdim=False):
        raise UnsupportedOpError("argmax returns indices (a data-dependent result); not supported")

    @function('argmin')
    def f_argmin(self, input, dim=None, keepdim=False):
        raise UnsupportedOpError("argmin returns indices (a data-dependent result); not supported")

    @function('logsumexp')
    def f_logsumexp(self, input, dim, keepdim=False):
        dims = self._full_reduce_shape(input, dim, keepdim)
        h = self.imp.hint
        m = self.reduce(input, dims, True, "max", hint=f"{h}_max")
        s = self.reduce(ExprVal(input.shape, lambda idx: B.call("exp", B.sub(input.at(idx), bcast_at(m, input.shape, idx))),
                                stats_dtype(input)), dims, True, "+", hint=f"{h}_sum")
        # guard -inf rows like torch: max == -inf -> use 0 offset; rows of finite data are the common case
        res = self.ew([m, s], lambda a, b: B.add(a, B.call("log", b)), shape=m.shape)
        return res if keepdim else Vs.squeeze(res, dims)

    def _var(self, input, dim, correction, keepdim, hint=None):
        dims = self._full_reduce_shape(input, dim, keepdim)
        n = math.prod(input.shape[d] for d in dims)
        h = hint or self.imp.hint
        acc = stats_dtype(input)
        s = self.reduce(input, dims, True, "+", hint=f"{h}_sum", dtype=acc)
        mean = self.scalar_div(s, n, hint=f"{h}_mean")
        q = self.reduce(ExprVal(input.shape, lambda idx: square_expr(B.sub(input.at(idx), bcast_at(mean, input.shape, idx))),
                                acc), dims, True, "+", hint=f"{h}square_expr")
        denom = max(n - correction, 0)
        return q, denom, dims

    def _correction(self, unbiased, correction):
        if correction is not None:
            return correction
        if unbiased is None:
            return 1
        return 1 if unbiased else 0

    @function('var')
    def f_var(self, input, dim=None, unbiased=None, keepdim=False, *, correction=None):
        if isinstance(dim, bool):
            unbiased, dim = dim, None
        q, denom, dims = self._var(input, dim, self._correction(unbiased, correction), keepdim)
        r = self.ew([q], lambda e: B.div(e, B.fconst(float(denom))), shape=q.shape)
        return r if keepdim else Vs.squeeze(r, dims)

    @function('std')
    def f_std(self, input, dim=None, unbiased=None, keepdim=False, *, correction=None):
        if isinstance(dim, bool):
            unbiased, dim = dim, None
        q, denom, dims = self._var(input, dim, self._correction(unbiased, correction), keepdim)
        r = self.ew([q], lambda e: B.call("sqrt", B.div(e, B.fconst(float(denom)))), shape=q.shape)
        return r if keepdim else Vs.squeeze(r, dims)

    @function('norm')
    def f_norm(self, input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
        if p in ("fro", 2, 2.0, None):
            s = self.reduce(input, dim, keepdim, "+", term=square_expr, hint=f"{self.imp.hint}square_expr")
            return self.ew([s], lambda e: B.call("sqrt", e), shape=s.shape)
        if p in (1, 1.0):
            return self.reduce(input, dim, keepdim, "+", term=lambda e: B.call("abs", e))
        if p in (math.inf, float("inf"), "inf"):
            return self.reduce(input, dim, keepdim, "max", term=lambda e: B.call("abs", e))
        if isinstance(p, (int, float)) and p > 0:
            s = self.reduce(input, dim, keepdim, "+", term=lambda e: B.binop("**", B.call("abs", e), B.fconst(p)),
                            hint=f"{self.imp.hint}_pow")
            return self.ew([s], lambda e: B.binop("**", e, B.fconst(1.0 / p)), shape=s.shape)
        raise UnsupportedOpError(f"norm with p={p!r}")

    @function('vector_norm')
    def f_vector_norm(self, x, ord=2, dim=None, keepdim=False, *, dtype=None):
        return self.f_norm(x, ord, dim, keepdim)

    @function('cumsum')
    def f_cumsum(self, input, dim, *, dtype=None):
        return self._scan(input, dim, "+")

    @function('cumprod')
    def f_cumprod(self, input, dim, *, dtype=None):
        return self._scan(input, dim, "*")

    def _scan(self, x, dim, op):
        d = norm_dim(dim, x.ndim)
        name = self.b.names.fresh(self.imp.hint)
        ident = B.fconst(0.0 if op == "+" else 1.0)
        dt = accumulator_dtype(x.dtype)

        def fn(idx):
            j = idx[d]
            if isinstance(j, A.Const):
                return x.at(idx)
            prev = list(idx)
            prev[d] = B.isub(j, B.const(1))
            acc = A.Access(name, dt, "g", tuple(prev))
            return A.BinOp(op, B.select(B.cmp("<=", B.const(1), j), acc, ident), x.at(idx))

        self.b.assign(name, x.shape, fn, dt, name=name)
        return TensorRef(name, x.shape, dt)

    # ------------------------------------------------------------------
    # softmax family

    def _softmax_dim(self, x, dim):
        if dim is None:
            return 0 if x.ndim in (0, 1, 3) else 1
        return norm_dim(dim, x.ndim)

    def _softmax(self, x, dim, log: bool, neg: bool = False):
        d = self._softmax_dim(x, dim)
        h = self.imp.hint
        src = x if not neg else ExprVal(x.shape, lambda idx: B.neg(x.at(idx)), x.dtype)
        m = self.reduce(src, [d], False, "max", hint=f"{h}_max")
        acc = stats_dtype(x)

        def widen(e):  # PyTorch computes the softmax of f16/bf16 values in f32
            return e if x.dtype == acc else B.call(acc, e)

        def shifted(idx):
            return B.sub(widen(src.at(idx)), widen(m.at(drop_dims(idx, [d]))))

        s = self.reduce(ExprVal(x.shape, lambda idx: B.call("exp", shifted(idx)), acc), [d], False, "+", hint=f"{h}_sum")
        if log:
            f = lambda idx: B.sub(shifted(idx), B.call("log", s.at(drop_dims(idx, [d]))))  # noqa: E731
        else:
            f = lambda idx: B.div(B.call("exp", shifted(idx)), s.at(drop_dims(idx, [d])))  # noqa: E731
        name = self.b.assign(h, x.shape, f, acc)
        return TensorRef(name, x.shape, acc)

    @function('softmax')
    def f_softmax(self, input, dim=None, _stacklevel=3, dtype=None):
        return self._softmax(input, dim, False)

    @function('log_softmax')
    def f_log_softmax(self, input, dim=None, _stacklevel=3, dtype=None):
        return self._softmax(input, dim, True)

    @function('softmin')
    def f_softmin(self, input, dim=None, _stacklevel=3, dtype=None):
        return self._softmax(input, dim, False, neg=True)
