"""Element-wise arithmetic, comparisons, selections and activations."""

from __future__ import annotations

from ...lang import ast as A
from .. import builder as B
from .. import values as Vs
from ..errors import UnsupportedOpError
from ..values import TensorRef, Val, View
from .base import OpsBase
from .common import GELU_TANH_K, SQRT1_2, UNARY, as_number, mask_condition
from .registry import function


class ElementwiseOps(OpsBase):
    # ------------------------------------------------------------------
    # element-wise arithmetic

    @function('add')
    def f_add(self, input, other, *, alpha=1, out=None):
        if not isinstance(input, Val) and not isinstance(other, Val):
            return input + alpha * other
        if alpha == 1:
            return self.ew([input, other], B.add)
        return self.ew([input, other], lambda a, b: B.add(a, B.mul(Vs.scalar_expr(alpha), b)))

    @function('sub')
    def f_sub(self, input, other, *, alpha=1, out=None):
        if alpha == 1:
            return self.ew([input, other], B.sub)
        return self.ew([input, other], lambda a, b: B.sub(a, B.mul(Vs.scalar_expr(alpha), b)))

    @function('rsub')
    def f_rsub(self, input, other, alpha=1):
        return self.f_sub(other, input, alpha=alpha)

    @function('div')
    def f_div(self, input, other, *, rounding_mode=None, out=None):
        if rounding_mode is None:
            return self.ew([input, other], B.div)
        if rounding_mode == "floor":
            if self.imp.out_dtype() in A.FLOAT_DTYPES:
                return self.ew([input, other], lambda a, b: B.call("floor", B.div(a, b)))
            return self.ew([input, other], lambda a, b: B.binop("//", a, b))
        if rounding_mode == "trunc":
            f = UNARY["trunc"]
            if self.imp.out_dtype() in A.FLOAT_DTYPES:
                return self.ew([input, other], lambda a, b: f(B.div(a, b)))
        raise UnsupportedOpError(f"div with rounding_mode={rounding_mode!r}")

    @function('fmod')
    def f_fmod(self, input, other):
        # C fmod: the result has the sign of the dividend
        def f(a, b):
            q = B.div(a, b)
            return B.sub(a, B.mul(b, UNARY["trunc"](q)))

        return self.ew([input, other], f)

    @function('pow')
    def f_pow(self, input, exponent):
        if isinstance(exponent, (int, float)) and not isinstance(exponent, bool) and isinstance(input, Val):
            e = exponent
            if e == 2:
                return self.unary(input, lambda x: B.mul(x, x))
            if e == 1:
                return self.unary(input, lambda x: x)
            if e == 0.5:
                return self.unary(input, lambda x: B.call("sqrt", x))
            if e == -0.5:
                return self.unary(input, lambda x: B.call("rsqrt", x))
            if e == -1:
                return self.unary(input, lambda x: B.div(B.fconst(1.0), x))
            if e == 3:
                return self.unary(input, lambda x: B.mul(B.mul(x, x), x))
            return self.unary(input, lambda x: B.binop("**", x, Vs.scalar_expr(e)))
        return self.ew([input, exponent], lambda a, b: B.binop("**", a, b))

    @function('float_power')
    def f_float_power(self, input, exponent):
        return self.f_pow(input, exponent)

    @function('clamp')
    def f_clamp(self, input, min=None, max=None):
        def f(x, lo, hi):
            e = x
            if lo is not None:
                e = B.call("max", e, lo)
            if hi is not None:
                e = B.call("min", e, hi)
            return e

        args = [input]
        lo_i = hi_i = None
        if min is not None:
            lo_i = len(args)
            args.append(as_number(min))
        if max is not None:
            hi_i = len(args)
            args.append(as_number(max))
        return self.ew(args, lambda *es: f(es[0], es[lo_i] if lo_i else None, es[hi_i] if hi_i else None))

    @function('clamp_min')
    def f_clamp_min(self, input, min):
        return self.f_clamp(input, min=min)

    @function('clamp_max')
    def f_clamp_max(self, input, max):
        return self.f_clamp(input, max=max)

    @function('where')
    def f_where(self, condition, input=None, other=None):
        if input is None:
            raise UnsupportedOpError("torch.where(condition) (nonzero indices) is not supported")
        return self.ew([condition, input, other], lambda c, a, b: B.select(mask_condition(c, condition), a, b))

    @function('masked_fill')
    def f_masked_fill(self, input, mask, value):
        return self.ew([input, mask, value], lambda a, m, v: B.select(mask_condition(m, mask), v, a))

    @function('logical_not')
    def f_logical_not(self, input):
        return self.ew([input], lambda a: B.cmp("==", a, B.const(0)), dtype="bool")

    @function('lerp')
    def f_lerp(self, input, end, weight):
        return self.ew([input, end, weight], lambda a, b, w: B.add(a, B.mul(w, B.sub(b, a))))

    @function('addcmul')
    def f_addcmul(self, input, tensor1, tensor2, *, value=1):
        return self.ew([input, tensor1, tensor2], lambda a, b, c: B.add(a, B.mul(B.mul(Vs.scalar_expr(value), b), c)))

    @function('addcdiv')
    def f_addcdiv(self, input, tensor1, tensor2, *, value=1):
        return self.ew([input, tensor1, tensor2], lambda a, b, c: B.add(a, B.mul(Vs.scalar_expr(value), B.div(b, c))))

    @function('triu')
    def f_triu(self, input, diagonal=0):
        return self._tri(input, diagonal, True)

    @function('tril')
    def f_tril(self, input, diagonal=0):
        return self._tri(input, diagonal, False)

    def _tri(self, x, k, upper):
        def fn(idx):
            i, j = idx[-2], idx[-1]
            d = B.isub(j, i)
            cond = B.cmp(">=", d, B.const(k)) if upper else B.cmp("<=", d, B.const(k))
            return B.select(cond, x.at(idx), B.fconst(0.0))

        name = self.b.assign(self.imp.hint, x.shape, fn, x.dtype)
        return TensorRef(name, x.shape, x.dtype)

    # ------------------------------------------------------------------
    # activations

    @function('relu')
    def f_relu(self, input, inplace=False):
        return self.unary(input, UNARY["relu"])

    @function('leaky_relu')
    def f_leaky_relu(self, input, negative_slope=0.01, inplace=False):
        s = float(negative_slope)
        return self.unary(input, lambda e: B.select(B.cmp(">", e, B.fconst(0.0)), e, B.mul(e, B.fconst(s))))

    @function('gelu')
    def f_gelu(self, input, approximate="none"):
        if approximate == "tanh":
            def f(e):
                inner = B.mul(B.fconst(GELU_TANH_K), B.add(e, B.mul(B.fconst(0.044715), B.mul(B.mul(e, e), e))))
                return B.mul(B.mul(B.fconst(0.5), e), B.add(B.fconst(1.0), B.call("tanh", inner)))
        elif approximate == "none":
            def f(e):
                return B.mul(B.mul(B.fconst(0.5), e), B.add(B.fconst(1.0), B.call("erf", B.mul(e, B.fconst(SQRT1_2)))))
        else:
            raise UnsupportedOpError(f"gelu approximate={approximate!r}")
        return self.unary(input, f)

    @function('silu')
    def f_silu(self, input, inplace=False):
        return self.unary(input, UNARY["silu"])

    @function('mish')
    def f_mish(self, input, inplace=False):
        return self.unary(input, UNARY["mish"])

    @function('hardswish')
    def f_hardswish(self, input, inplace=False):
        return self.unary(input, UNARY["hardswish"])

    @function('hardsigmoid')
    def f_hardsigmoid(self, input, inplace=False):
        return self.unary(input, UNARY["hardsigmoid"])

    @function('relu6')
    def f_relu6(self, input, inplace=False):
        return self.unary(input, UNARY["relu6"])

    @function('selu')
    def f_selu(self, input, inplace=False):
        return self.unary(input, UNARY["selu"])

    @function('hardtanh')
    def f_hardtanh(self, input, min_val=-1.0, max_val=1.0, inplace=False):
        lo, hi = float(min_val), float(max_val)
        return self.unary(input, lambda e: B.call("min", B.call("max", e, B.fconst(lo)), B.fconst(hi)))

    @function('elu')
    def f_elu(self, input, alpha=1.0, inplace=False):
        a = float(alpha)
        return self.unary(input, lambda e: B.select(B.cmp(">", e, B.fconst(0.0)), e,
                                                    B.mul(B.fconst(a), B.sub(B.call("exp", e), B.fconst(1.0)))))

    @function('celu')
    def f_celu(self, input, alpha=1.0, inplace=False):
        a = float(alpha)
        return self.unary(input, lambda e: B.select(B.cmp(">", e, B.fconst(0.0)), e, B.mul(
            B.fconst(a), B.sub(B.call("exp", B.div(e, B.fconst(a))), B.fconst(1.0)))))

    @function('softplus')
    def f_softplus(self, input, beta=1.0, threshold=20.0):
        bt, th = float(beta), float(threshold)

        def f(e):
            be = e if bt == 1.0 else B.mul(e, B.fconst(bt))
            sp = B.call("log", B.add(B.fconst(1.0), B.call("exp", be)))
            if bt != 1.0:
                sp = B.div(sp, B.fconst(bt))
            return B.select(B.cmp(">", be, B.fconst(th)), e, sp)

        return self.unary(input, f)

    @function('softsign')
    def f_softsign(self, input):
        return self.unary(input, UNARY["softsign"])

    @function('softshrink')
    def f_softshrink(self, input, lambd=0.5):
        lam = float(lambd)
        return self.unary(input, lambda e: B.select(
            B.cmp(">", e, B.fconst(lam)), B.sub(e, B.fconst(lam)),
            B.select(B.cmp("<", e, B.neg(B.fconst(lam))), B.add(e, B.fconst(lam)), B.fconst(0.0))))

    @function('hardshrink')
    def f_hardshrink(self, input, lambd=0.5):
        lam = float(lambd)
        return self.unary(input, lambda e: B.select(B.cmp(">", B.call("abs", e), B.fconst(lam)), e, B.fconst(0.0)))

    @function('threshold')
    def f_threshold(self, input, threshold, value, inplace=False):
        th, v = float(threshold), float(value)
        return self.unary(input, lambda e: B.select(B.cmp(">", e, B.fconst(th)), e, Vs.scalar_expr(v)))

    @function('prelu')
    def f_prelu(self, input, weight):
        # weight [C] applies along dim 1 (or a single value)
        if weight.numel == 1:
            w = View(weight, (), lambda idx: [B.const(0)] * weight.ndim)
            return self.ew([input, w], lambda e, a: B.select(B.cmp(">", e, B.fconst(0.0)), e, B.mul(a, e)))
        wv = Vs.reshape(weight, [weight.numel] + [1] * (input.ndim - 2))
        return self.ew([input, wv], lambda e, a: B.select(B.cmp(">", e, B.fconst(0.0)), e, B.mul(a, e)))
