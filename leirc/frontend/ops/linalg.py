"""Contractions: matmul, linear, einsum, tensordot, scaled dot-product attention."""

from __future__ import annotations

import math

from .. import builder as B
from .. import values as Vs
from ..errors import UnsupportedOpError
from ..values import TensorRef, Val, bcast_at, broadcast_shapes
from .base import OpsBase
from .common import accumulator_dtype, batched_at, stats_dtype
from .registry import function


class LinalgOps(OpsBase):
    # ------------------------------------------------------------------
    # matrix products

    def _contract(self, a: Val, b: Val, hint=None) -> Val:
        """torch.matmul semantics."""
        if a.ndim == 0 or b.ndim == 0:
            raise UnsupportedOpError("matmul of a 0-d tensor")
        a2 = Vs.unsqueeze(a, 0) if a.ndim == 1 else a
        b2 = Vs.unsqueeze(b, -1) if b.ndim == 1 else b
        batch = broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
        m, k = a2.shape[-2:]
        k2, n = b2.shape[-2:]
        if k != k2:
            raise ValueError(f"matmul shapes {list(a.shape)} and {list(b.shape)} do not match")
        nb = len(batch)

        def fn(o, r):
            bi = o[:nb]
            i, j = o[nb], o[nb + 1]
            kk = r[0]
            return B.mul(batched_at(a2, batch, bi, [i, kk]), batched_at(b2, batch, bi, [kk, j]))

        out_shape = tuple(batch) + (m, n)
        dt = accumulator_dtype(self.imp.out_dtype())
        name = self.b.reduce(hint or self.imp.hint, out_shape, [k], fn, "+", dtype=dt)
        res: Val = TensorRef(name, out_shape, dt)
        if b.ndim == 1:
            res = Vs.squeeze(res, -1)
        if a.ndim == 1:
            res = Vs.squeeze(res, -2 if b.ndim != 1 else -1)
        return res

    @function('matmul')
    def f_matmul(self, input, other):
        return self._contract(input, other)

    f_mm = f_bmm = function('mm', 'bmm')(f_matmul)

    @function('mv')
    def f_mv(self, input, vec):
        return self._contract(input, vec)

    @function('dot')
    def f_dot(self, input, other):
        return self._contract(input, other)

    f_inner = f_vdot = function('inner', 'vdot')(f_dot)

    @function('outer')
    def f_outer(self, input, vec2):
        return self.ew([Vs.unsqueeze(input, 1), Vs.unsqueeze(vec2, 0)], B.mul)

    f_ger = function('ger')(f_outer)

    @function('addmm')
    def f_addmm(self, input, mat1, mat2, *, beta=1, alpha=1):
        return self._add_product(input, mat1, mat2, beta, alpha)

    f_baddbmm = f_addmv = function('baddbmm', 'addmv')(f_addmm)

    def _add_product(self, input, m1, m2, beta, alpha):
        p = self._contract(m1, m2, hint=f"{self.imp.hint}_mm")

        def f(c, pr):
            t = pr if alpha == 1 else B.mul(Vs.scalar_expr(alpha), pr)
            if beta == 0:
                return t
            cc = c if beta == 1 else B.mul(Vs.scalar_expr(beta), c)
            return B.add(cc, t)

        return self.ew([input, p], f, shape=p.shape)

    @function('linear')
    def f_linear(self, input, weight, bias=None):
        """y[..., o] = sum_k x[..., k] * W[o, k] (+ b[o])."""
        x = input
        if weight.ndim == 1:
            return self._contract(x, weight)
        o_dim, k_dim = weight.shape
        lead = tuple(x.shape[:-1])
        nl = len(lead)
        dt = accumulator_dtype(self.imp.out_dtype())
        name = self.b.reduce(self.imp.hint, lead + (o_dim,), [k_dim],
                             lambda o, r: B.mul(x.at(list(o[:nl]) + [r[0]]), weight.at([o[nl], r[0]])), "+", dtype=dt)
        if bias is not None:
            self.b.update(name, lead + (o_dim,), lambda idx, cur: B.add(cur, bcast_at(bias, lead + (o_dim,), idx)), dt)
        return TensorRef(name, lead + (o_dim,), dt)

    @function('bilinear')
    def f_bilinear(self, input1, input2, weight, bias=None):
        # y[n, o] = sum_{i,j} x1[n,i] W[o,i,j] x2[n,j] + b[o]
        n = input1.shape[0]
        o_dim, i_dim, j_dim = weight.shape
        dt = accumulator_dtype(self.imp.out_dtype())
        name = self.b.reduce(self.imp.hint, (n, o_dim), [i_dim, j_dim], lambda o, r: B.mul(
            B.mul(input1.at([o[0], r[0]]), weight.at([o[1], r[0], r[1]])), input2.at([o[0], r[1]])), "+", dtype=dt)
        if bias is not None:
            self.b.update(name, (n, o_dim), lambda idx, cur: B.add(cur, bcast_at(bias, (n, o_dim), idx)), dt)
        return TensorRef(name, (n, o_dim), dt)

    @function('einsum')
    def f_einsum(self, equation, *operands):
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = tuple(operands[0])
        eq = equation.replace(" ", "")
        if "..." in eq:
            raise UnsupportedOpError("einsum with '...' is not supported")
        if "->" in eq:
            lhs, rhs = eq.split("->")
        else:
            lhs = eq
            letters = lhs.replace(",", "")
            rhs = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
        terms = lhs.split(",")
        if len(terms) != len(operands) or len(operands) > 2:
            raise UnsupportedOpError("einsum with more than two operands is not supported")
        sizes: dict[str, int] = {}
        for t, op in zip(terms, operands):
            if len(t) != op.ndim:
                raise ValueError(f"einsum term '{t}' does not match a {op.ndim}-d operand")
            if len(set(t)) != len(t):
                raise UnsupportedOpError("einsum with a repeated index inside one operand (diagonal)")
            for c, s in zip(t, op.shape):
                if sizes.get(c, s) != s and s != 1 and sizes[c] != 1:
                    raise ValueError(f"einsum size mismatch for '{c}'")
                sizes[c] = max(sizes.get(c, 1), s)
        red = [c for c in sizes if c not in rhs]
        out_shape = [sizes[c] for c in rhs]
        red_shape = [sizes[c] for c in red]

        def fn(o, r):
            env = dict(zip(rhs, o))
            env.update(zip(red, r))
            e = None
            for t, op in zip(terms, operands):
                sub = [B.const(0) if s == 1 else env[c] for c, s in zip(t, op.shape)]
                a = op.at(sub)
                e = a if e is None else B.mul(e, a)
            return e

        dt = accumulator_dtype(self.imp.out_dtype())
        if not red:
            name = self.b.assign(self.imp.hint, out_shape, lambda o: fn(o, []), dt)
        else:
            name = self.b.reduce(self.imp.hint, out_shape, red_shape, fn, "+", dtype=dt)
        return TensorRef(name, out_shape, dt)

    @function('tensordot')
    def f_tensordot(self, a, b, dims=2):
        raise UnsupportedOpError("tensordot is not supported (use einsum or matmul)")

    # ------------------------------------------------------------------
    # attention

    @function('sdpa')
    def f_sdpa(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
               enable_gqa=False):
        if dropout_p:
            raise UnsupportedOpError("scaled_dot_product_attention with dropout_p > 0 is random")
        q, k, v = query, key, value
        batch = broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        nb = len(batch)
        L, E = q.shape[-2:]
        S = k.shape[-2]
        Ev = v.shape[-1]
        sc = float(scale) if scale is not None else 1.0 / math.sqrt(E)
        h = self.imp.hint
        s_shape = tuple(batch) + (L, S)
        dt = stats_dtype(q, k, v)
        sname = self.b.reduce(f"{h}_qk", s_shape, [E], lambda o, r: B.mul(
            batched_at(q, batch, o[:nb], [o[nb], r[0]]), batched_at(k, batch, o[:nb], [o[nb + 1], r[0]])), "+",
            dtype=dt)
        sref = TensorRef(sname, s_shape, dt)

        def scaled(idx):
            e = B.mul(sref.at(idx), B.fconst(sc))
            i, j = idx[nb], idx[nb + 1]
            if attn_mask is not None:
                if attn_mask.dtype == "bool":
                    e = B.select(bcast_at(attn_mask, s_shape, idx), e, B.NEG_INF)
                else:
                    e = B.add(e, bcast_at(attn_mask, s_shape, idx))
            if is_causal:
                e = B.select(B.cmp("<=", j, i), e, B.NEG_INF)
            return e

        scn = self.b.assign(f"{h}_scores", s_shape, scaled, dt)
        p = self._softmax(TensorRef(scn, s_shape, dt), -1, False)
        o_shape = tuple(batch) + (L, Ev)
        name = self.b.reduce(h, o_shape, [S], lambda o, r: B.mul(
            p.at(list(o[:nb]) + [o[nb], r[0]]), batched_at(v, batch, o[:nb], [r[0], o[nb + 1]])), "+", dtype=dt)
        return TensorRef(name, o_shape, dt)
