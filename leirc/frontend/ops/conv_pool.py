"""Convolutions (incl. transposed), padding, max/average/adaptive pooling."""

from __future__ import annotations

import math

from .. import builder as B
from .. import values as Vs
from ..errors import UnsupportedOpError
from ..values import TensorRef, Val
from .base import OpsBase
from .common import Expr, accumulator_dtype, pair_arg
from .registry import function


class ConvPoolOps(OpsBase):
    # ------------------------------------------------------------------
    # convolution

    def _pads(self, padding, nd, kernel, dilation):
        """[(lo, hi)] per spatial dim."""
        if isinstance(padding, str):
            if padding == "valid":
                return [(0, 0)] * nd
            if padding == "same":
                out = []
                for k, d in zip(kernel, dilation):
                    tot = d * (k - 1)
                    out.append((tot // 2, tot - tot // 2))
                return out
            raise UnsupportedOpError(f"padding={padding!r}")
        p = pair_arg(padding, nd)
        return [(x, x) for x in p]

    def _padded(self, x: Val, pads, fill: Expr, extra_hi=None, hint=None) -> Val:
        """A padded copy of x [N, C, *S] (spatial dims padded by ``pads``), or x itself."""
        nd = len(pads)
        extra_hi = extra_hi or [0] * nd
        if all(lo == 0 and hi + e == 0 for (lo, hi), e in zip(pads, extra_hi)):
            return x
        lead = x.ndim - nd
        shape = list(x.shape[:lead]) + [x.shape[lead + k] + lo + hi + e for k, ((lo, hi), e) in
                                        enumerate(zip(pads, extra_hi))]

        def fn(idx):
            cond = None
            sub = list(idx[:lead])
            for k, (lo, hi) in enumerate(pads):
                e = idx[lead + k]
                n = x.shape[lead + k]
                if lo or hi or extra_hi[k]:
                    cond = B.land(cond, B.chain(B.const(lo), e, B.const(lo + n)))
                sub.append(B.isub(e, B.const(lo)))
            return B.select(cond, x.at(sub), fill) if cond is not None else x.at(sub)

        name = self.b.assign(hint or f"{self.imp.hint}_pad", shape, fn, x.dtype)
        return TensorRef(name, shape, x.dtype)

    def _conv(self, nd, input, weight, bias, stride, padding, dilation, groups):
        x = input
        unbatched = x.ndim == nd + 1
        if unbatched:
            x = Vs.unsqueeze(x, 0)
        if x.ndim != nd + 2:
            raise ValueError(f"conv{nd}d expects a {nd + 2}-d input")
        n, c_in = x.shape[:2]
        c_out, cg = weight.shape[:2]
        ks = list(weight.shape[2:])
        st = pair_arg(stride, nd)
        dl = pair_arg(dilation, nd)
        pads = self._pads(padding, nd, ks, dl)
        g = int(groups)
        if c_in != cg * g or c_out % g:
            raise ValueError("channel counts do not match groups")
        og = c_out // g
        sp = list(x.shape[2:])
        out_sp = [(s + lo + hi - d * (k - 1) - 1) // t + 1 for s, (lo, hi), d, k, t in zip(sp, pads, dl, ks, st)]
        if any(o <= 0 for o in out_sp):
            raise ValueError("convolution output would be empty")
        xp = self._padded(x, pads, B.fconst(0.0))
        out_shape = [n, c_out] + out_sp
        red_shape = [cg] + ks

        def fn(o, r):
            cin = B.iadd(B.imul(B.ifloordiv(o[1], og), cg), r[0]) if g > 1 else r[0]
            xs = [o[0], cin] + [B.iadd(B.imul(o[2 + k], st[k]), B.imul(r[1 + k], dl[k])) for k in range(nd)]
            return B.mul(xp.at(xs), weight.at([o[1], r[0]] + list(r[1:])))

        dt = accumulator_dtype(self.imp.out_dtype())
        name = self.b.reduce(self.imp.hint, out_shape, red_shape, fn, "+", dtype=dt)
        if bias is not None:
            self.b.update(name, out_shape, lambda idx, cur: B.add(cur, bias.at([idx[1]])), dt)
        res: Val = TensorRef(name, out_shape, dt)
        return Vs.squeeze(res, 0) if unbatched else res

    @function('conv1d')
    def f_conv1d(self, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        return self._conv(1, input, weight, bias, stride, padding, dilation, groups)

    @function('conv2d')
    def f_conv2d(self, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        return self._conv(2, input, weight, bias, stride, padding, dilation, groups)

    @function('conv3d')
    def f_conv3d(self, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        return self._conv(3, input, weight, bias, stride, padding, dilation, groups)

    def _conv_t(self, nd, input, weight, bias, stride, padding, output_padding, groups, dilation):
        x = input
        unbatched = x.ndim == nd + 1
        if unbatched:
            x = Vs.unsqueeze(x, 0)
        n, c_in = x.shape[:2]
        cg_in, og = weight.shape[:2]  # weight [C_in, C_out/groups, *k]
        g = int(groups)
        if cg_in != c_in:
            raise ValueError("conv_transpose weight does not match the input channels")
        cg = c_in // g
        c_out = og * g
        ks = list(weight.shape[2:])
        st = pair_arg(stride, nd)
        pd = pair_arg(padding, nd)
        opd = pair_arg(output_padding, nd)
        dl = pair_arg(dilation, nd)
        sp = list(x.shape[2:])
        out_sp = [(s - 1) * t - 2 * p + d * (k - 1) + op + 1 for s, t, p, d, k, op in zip(sp, st, pd, dl, ks, opd)]
        out_shape = [n, c_out] + out_sp
        red_shape = [cg] + ks

        def fn(o, r):
            cond = None
            xs = []
            for k in range(nd):
                t = B.isub(B.iadd(o[2 + k], B.const(pd[k])), B.imul(r[1 + k], dl[k]))
                if st[k] == 1:
                    cond = B.land(cond, B.chain(B.const(0), t, B.const(sp[k])))
                    xs.append(t)
                else:
                    q = B.ifloordiv(t, st[k])
                    cond = B.land(cond, B.cmp("==", B.imod(t, st[k]), B.const(0)))
                    cond = B.land(cond, B.chain(B.const(0), q, B.const(sp[k])))
                    xs.append(q)
            gi = B.ifloordiv(o[1], og) if g > 1 else B.const(0)
            cin = B.iadd(B.imul(gi, cg), r[0]) if g > 1 else r[0]
            oc = B.imod(o[1], og) if g > 1 else o[1]
            xv = x.at([o[0], cin] + xs)
            w = weight.at([cin, oc] + list(r[1:]))
            return B.mul(B.select(cond, xv, B.fconst(0.0)), w)

        dt = accumulator_dtype(self.imp.out_dtype())
        name = self.b.reduce(self.imp.hint, out_shape, red_shape, fn, "+", dtype=dt)
        if bias is not None:
            self.b.update(name, out_shape, lambda idx, cur: B.add(cur, bias.at([idx[1]])), dt)
        res: Val = TensorRef(name, out_shape, dt)
        return Vs.squeeze(res, 0) if unbatched else res

    @function('conv_transpose1d')
    def f_conv_transpose1d(self, input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        return self._conv_t(1, input, weight, bias, stride, padding, output_padding, groups, dilation)

    @function('conv_transpose2d')
    def f_conv_transpose2d(self, input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        return self._conv_t(2, input, weight, bias, stride, padding, output_padding, groups, dilation)

    @function('conv_transpose3d')
    def f_conv_transpose3d(self, input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        return self._conv_t(3, input, weight, bias, stride, padding, output_padding, groups, dilation)

    # ------------------------------------------------------------------
    # pooling

    def _pool_out(self, s, k, st, p, d, ceil_mode):
        num = s + 2 * p - d * (k - 1) - 1
        if ceil_mode:
            o = -(-num // st) + 1
            if (o - 1) * st >= s + p:
                o -= 1
        else:
            o = num // st + 1
        return o

    def _max_pool(self, nd, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                  return_indices=False):
        if return_indices:
            raise UnsupportedOpError("max pooling with return_indices=True (argmax positions) is not supported")
        x = input
        ks = pair_arg(kernel_size, nd)
        st = pair_arg(stride if stride not in (None, []) else kernel_size, nd)
        pd = pair_arg(padding, nd)
        dl = pair_arg(dilation, nd)
        lead = x.ndim - nd
        sp = list(x.shape[lead:])
        out_sp = [self._pool_out(s, k, t, p, d, ceil_mode) for s, k, t, p, d in zip(sp, ks, st, pd, dl)]
        need = [(o - 1) * t + d * (k - 1) + 1 for o, t, d, k in zip(out_sp, st, dl, ks)]
        extra = [max(0, nn - (s + 2 * p)) for nn, s, p in zip(need, sp, pd)]
        xp = self._padded(x, [(p, p) for p in pd], B.NEG_INF, extra_hi=extra)
        out_shape = list(x.shape[:lead]) + out_sp

        def fn(o, r):
            return xp.at(list(o[:lead]) + [B.iadd(B.imul(o[lead + k], st[k]), B.imul(r[k], dl[k])) for k in range(nd)])

        name = self.b.reduce(self.imp.hint, out_shape, ks, fn, "max", dtype=x.dtype)
        return TensorRef(name, out_shape, x.dtype)

    @function('max_pool1d')
    def f_max_pool1d(self, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        return self._max_pool(1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)

    @function('max_pool2d')
    def f_max_pool2d(self, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        return self._max_pool(2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)

    @function('max_pool3d')
    def f_max_pool3d(self, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        return self._max_pool(3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)

    def _avg_pool(self, nd, input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                  divisor_override=None):
        x = input
        ks = pair_arg(kernel_size, nd)
        st = pair_arg(stride if stride not in (None, []) else kernel_size, nd)
        pd = pair_arg(padding, nd)
        lead = x.ndim - nd
        sp = list(x.shape[lead:])
        out_sp = [self._pool_out(s, k, t, p, 1, ceil_mode) for s, k, t, p in zip(sp, ks, st, pd)]
        need = [(o - 1) * t + k for o, t, k in zip(out_sp, st, ks)]
        extra = [max(0, nn - (s + 2 * p)) for nn, s, p in zip(need, sp, pd)]
        if any(extra) and divisor_override is None:
            raise UnsupportedOpError("average pooling with ceil_mode windows past the padding is not supported")
        xp = self._padded(x, [(p, p) for p in pd], B.fconst(0.0), extra_hi=extra)
        out_shape = list(x.shape[:lead]) + out_sp
        h = self.imp.hint

        def fn(o, r):
            return xp.at(list(o[:lead]) + [B.iadd(B.imul(o[lead + k], st[k]), r[k]) for k in range(nd)])

        acc = accumulator_dtype(x.dtype)
        s = self.b.reduce(f"{h}_sum", out_shape, ks, fn, "+", dtype=acc)
        sref = TensorRef(s, out_shape, acc)
        if divisor_override:
            return self.scalar_div(sref, divisor_override)
        if count_include_pad or not any(pd):
            return self.scalar_div(sref, math.prod(ks))

        # count_include_pad=False: divide by the number of window elements inside the input
        def count(idx):
            e = None
            for k in range(nd):
                i = idx[lead + k]
                start = B.isub(B.imul(i, st[k]), B.const(pd[k]))
                hi = B.call("min", B.iadd(B.imul(i, st[k]), B.const(ks[k] - pd[k])), B.const(sp[k]))
                lo = B.call("max", start, B.const(0))
                c = B.sub(hi, lo)
                e = c if e is None else B.mul(e, c)
            return e

        name = self.b.assign(h, out_shape, lambda idx: B.div(sref.at(idx), B.call(acc, count(idx))), x.dtype)
        return TensorRef(name, out_shape, x.dtype)

    @function('avg_pool1d')
    def f_avg_pool1d(self, input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        return self._avg_pool(1, input, kernel_size, stride, padding, ceil_mode, count_include_pad)

    @function('avg_pool2d')
    def f_avg_pool2d(self, input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                     divisor_override=None):
        return self._avg_pool(2, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)

    @function('avg_pool3d')
    def f_avg_pool3d(self, input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                     divisor_override=None):
        return self._avg_pool(3, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)

    def _adaptive(self, nd, input, output_size, kind):
        x = input
        lead = x.ndim - nd
        sp = list(x.shape[lead:])
        osz = list(output_size) if isinstance(output_size, (list, tuple)) else [output_size] * nd
        osz = [s if o is None else int(o) for o, s in zip(osz, sp)]
        if any(s % o for s, o in zip(sp, osz)):
            return self._adaptive_bins(nd, x, sp, osz, kind)
        ks = [s // o for s, o in zip(sp, osz)]
        if kind == "avg":
            return self._avg_pool(nd, x, ks, ks, 0)
        return self._max_pool(nd, x, ks, ks, 0)

    def _adaptive_bins(self, nd, x, sp, osz, kind):
        """Adaptive pooling with uneven bins: bin i of a dim covers
        [floor(i*S/O), ceil((i+1)*S/O)); loops run over the longest bin, guarded."""
        lead = x.ndim - nd
        kmax = [max(-(-((i + 1) * s) // o) - (i * s) // o for i in range(o)) for s, o in zip(sp, osz)]
        out_shape = list(x.shape[:lead]) + osz

        def start(i, s, o):
            return B.ifloordiv(B.imul(i, s), o)

        def end(i, s, o):
            return B.ifloordiv(B.iadd(B.imul(i, s), B.const(s + o - 1)), o)

        def fn(o_idx, r):
            cond = None
            sub = list(o_idx[:lead])
            for k in range(nd):
                i = o_idx[lead + k]
                e = B.iadd(start(i, sp[k], osz[k]), r[k])
                cond = B.land(cond, B.cmp("<", e, B.const(sp[k])))
                cond = B.land(cond, B.cmp("<", e, end(i, sp[k], osz[k])))
                sub.append(e)
            fill = B.fconst(0.0) if kind == "avg" else B.NEG_INF
            return B.select(cond, x.at(sub), fill)

        h = self.imp.hint
        if kind == "max":
            name = self.b.reduce(h, out_shape, kmax, fn, "max", dtype=x.dtype)
            return TensorRef(name, out_shape, x.dtype)
        acc = accumulator_dtype(x.dtype)
        s = self.b.reduce(f"{h}_sum", out_shape, kmax, fn, "+", dtype=acc)
        sref = TensorRef(s, out_shape, acc)

        def count(idx):
            e = None
            for k in range(nd):
                i = idx[lead + k]
                c = B.sub(end(i, sp[k], osz[k]), start(i, sp[k], osz[k]))
                e = c if e is None else B.mul(e, c)
            return e

        name = self.b.assign(h, out_shape, lambda idx: B.div(sref.at(idx), B.call(acc, count(idx))), x.dtype)
        return TensorRef(name, out_shape, x.dtype)

    @function('adaptive_avg_pool1d')
    def f_adaptive_avg_pool1d(self, input, output_size):
        return self._adaptive(1, input, output_size, "avg")

    @function('adaptive_avg_pool2d')
    def f_adaptive_avg_pool2d(self, input, output_size):
        return self._adaptive(2, input, output_size, "avg")

    @function('adaptive_avg_pool3d')
    def f_adaptive_avg_pool3d(self, input, output_size):
        return self._adaptive(3, input, output_size, "avg")

    @function('adaptive_max_pool1d')
    def f_adaptive_max_pool1d(self, input, output_size, return_indices=False):
        if return_indices:
            raise UnsupportedOpError("adaptive max pooling with return_indices=True")
        return self._adaptive(1, input, output_size, "max")

    @function('adaptive_max_pool2d')
    def f_adaptive_max_pool2d(self, input, output_size, return_indices=False):
        if return_indices:
            raise UnsupportedOpError("adaptive max pooling with return_indices=True")
        return self._adaptive(2, input, output_size, "max")

    @function('adaptive_max_pool3d')
    def f_adaptive_max_pool3d(self, input, output_size, return_indices=False):
        if return_indices:
            raise UnsupportedOpError("adaptive max pooling with return_indices=True")
        return self._adaptive(3, input, output_size, "max")

    @function('pad')
    def f_pad(self, input, pad, mode="constant", value=None):
        if mode != "constant":
            raise UnsupportedOpError(f"F.pad mode={mode!r} (only 'constant')")
        pad = list(pad)
        nd = len(pad) // 2
        x = input
        lead = x.ndim - nd
        pads = []
        for k in range(nd):  # pad lists the last dim first
            lo, hi = pad[2 * (nd - 1 - k)], pad[2 * (nd - 1 - k) + 1]
            pads.append((lo, hi))
        if any(lo < 0 or hi < 0 for lo, hi in pads):
            raise UnsupportedOpError("negative padding (cropping) in F.pad")
        fill = Vs.scalar_expr(float(value or 0.0))
        shape = list(x.shape[:lead]) + [x.shape[lead + k] + lo + hi for k, (lo, hi) in enumerate(pads)]

        def fn(idx):
            cond = None
            sub = list(idx[:lead])
            for k, (lo, hi) in enumerate(pads):
                e = idx[lead + k]
                if lo or hi:
                    cond = B.land(cond, B.chain(B.const(lo), e, B.const(lo + x.shape[lead + k])))
                sub.append(B.isub(e, B.const(lo)))
            return B.select(cond, x.at(sub), fill) if cond is not None else x.at(sub)

        name = self.b.assign(self.imp.hint, shape, fn, x.dtype)
        return TensorRef(name, shape, x.dtype)
