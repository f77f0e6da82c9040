"""Loss functions and distances."""

from __future__ import annotations

from typing import Optional

from ...lang import ast as A
from .. import builder as B
from ..errors import UnsupportedOpError
from ..values import ExprVal, TensorRef, Val, bcast_at, broadcast_shapes, norm_dim
from .base import OpsBase
from .common import square_expr, stats_dtype
from .registry import function


class LossOps(OpsBase):
    # ------------------------------------------------------------------
    # losses

    def _loss_reduce(self, elem: Val, reduction: str, batch: Optional[int] = None):
        if reduction == "none":
            return self.materialize(elem)
        s = self.reduce(elem, None, False, "+", hint=f"{self.imp.hint}_sum" if reduction != "sum" else None)
        if reduction == "sum":
            return s
        if reduction == "mean":
            return self.scalar_div(s, elem.numel)
        if reduction == "batchmean":
            return self.scalar_div(s, batch if batch is not None else 1)
        raise UnsupportedOpError(f"reduction={reduction!r}")

    @staticmethod
    def _legacy_reduction(size_average, reduce, reduction):
        if size_average is None and reduce is None:
            return reduction
        sa = True if size_average is None else size_average
        rd = True if reduce is None else reduce
        if not rd:
            return "none"
        return "mean" if sa else "sum"

    def _pointwise2(self, a, b, f):
        shape = broadcast_shapes(a.shape, b.shape)
        return ExprVal(shape, lambda idx: f(bcast_at(a, shape, idx), bcast_at(b, shape, idx)), stats_dtype(a, b))

    @function('mse_loss')
    def f_mse_loss(self, input, target, size_average=None, reduce=None, reduction="mean", weight=None):
        red = self._legacy_reduction(size_average, reduce, reduction)
        return self._loss_reduce(self._pointwise2(input, target, lambda a, b: square_expr(B.sub(a, b))), red)

    @function('l1_loss')
    def f_l1_loss(self, input, target, size_average=None, reduce=None, reduction="mean", weight=None):
        red = self._legacy_reduction(size_average, reduce, reduction)
        return self._loss_reduce(self._pointwise2(input, target, lambda a, b: B.call("abs", B.sub(a, b))), red)

    @function('smooth_l1_loss')
    def f_smooth_l1_loss(self, input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
        red = self._legacy_reduction(size_average, reduce, reduction)
        bt = float(beta)

        def f(a, b):
            d = B.call("abs", B.sub(a, b))
            if bt == 0:
                return d
            return B.select(B.cmp("<", d, B.fconst(bt)), B.div(B.mul(B.fconst(0.5), B.mul(d, d)), B.fconst(bt)),
                            B.sub(d, B.fconst(0.5 * bt)))

        return self._loss_reduce(self._pointwise2(input, target, f), red)

    @function('huber_loss')
    def f_huber_loss(self, input, target, reduction="mean", delta=1.0, weight=None):
        dl = float(delta)

        def f(a, b):
            d = B.call("abs", B.sub(a, b))
            return B.select(B.cmp("<", d, B.fconst(dl)), B.mul(B.fconst(0.5), B.mul(d, d)),
                            B.mul(B.fconst(dl), B.sub(d, B.fconst(0.5 * dl))))

        return self._loss_reduce(self._pointwise2(input, target, f), reduction)

    @function('kl_div')
    def f_kl_div(self, input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
        red = self._legacy_reduction(size_average, reduce, reduction)
        if log_target:
            f = lambda x, t: B.mul(B.call("exp", t), B.sub(t, x))  # noqa: E731
        else:
            f = lambda x, t: B.sub(B.select(B.cmp("==", t, B.fconst(0.0)), B.fconst(0.0),  # noqa: E731
                                            B.mul(t, B.call("log", t))), B.mul(t, x))
        elem = self._pointwise2(input, target, f)
        return self._loss_reduce(elem, red, batch=input.shape[0] if input.ndim else 1)

    @function('hinge_embedding_loss')
    def f_hinge_embedding_loss(self, input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
        red = self._legacy_reduction(size_average, reduce, reduction)
        m = float(margin)

        def f(x, t):
            neg_part = B.select(B.cmp("!=", t, B.fconst(1.0)), B.call("max", B.sub(B.fconst(m), x), B.fconst(0.0)),
                                B.fconst(0.0))
            pos_part = B.select(B.cmp("!=", t, B.neg(B.fconst(1.0))), x, B.fconst(0.0))
            return B.add(neg_part, pos_part)

        return self._loss_reduce(self._pointwise2(input, target, f), red)

    @function('soft_margin_loss')
    def f_soft_margin_loss(self, input, target, size_average=None, reduce=None, reduction="mean"):
        red = self._legacy_reduction(size_average, reduce, reduction)
        return self._loss_reduce(self._pointwise2(input, target, lambda x, t: B.call(
            "log", B.add(B.fconst(1.0), B.call("exp", B.neg(B.mul(t, x)))))), red)

    @function('binary_cross_entropy')
    def f_binary_cross_entropy(self, input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
        red = self._legacy_reduction(size_average, reduce, reduction)

        def f(x, t):
            lx = B.call("max", B.call("log", x), B.neg(B.fconst(100.0)))
            l1x = B.call("max", B.call("log", B.sub(B.fconst(1.0), x)), B.neg(B.fconst(100.0)))
            return B.neg(B.add(B.mul(t, lx), B.mul(B.sub(B.fconst(1.0), t), l1x)))

        elem = self._pointwise2(input, target, f)
        if weight is not None:
            e0 = elem
            elem = ExprVal(e0.shape, lambda idx: B.mul(e0.at(idx), bcast_at(weight, e0.shape, idx)),
                           stats_dtype(e0, weight))
        return self._loss_reduce(elem, red)

    @function('binary_cross_entropy_with_logits')
    def f_binary_cross_entropy_with_logits(self, input, target, weight=None, size_average=None, reduce=None,
                                           reduction="mean", pos_weight=None):
        if weight is not None or pos_weight is not None:
            raise UnsupportedOpError("binary_cross_entropy_with_logits with weights")
        red = self._legacy_reduction(size_average, reduce, reduction)

        def f(x, t):  # (1-t)*x + log(1+exp(-|x|)) + max(-x, 0)
            return B.add(B.add(B.mul(B.sub(B.fconst(1.0), t), x),
                               B.call("log", B.add(B.fconst(1.0), B.call("exp", B.neg(B.call("abs", x)))))),
                         B.call("max", B.neg(x), B.fconst(0.0)))

        return self._loss_reduce(self._pointwise2(input, target, f), red)

    @function('cross_entropy')
    def f_cross_entropy(self, input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                        reduction="mean", label_smoothing=0.0):
        if weight is not None or label_smoothing:
            raise UnsupportedOpError("cross_entropy with class weights or label smoothing")
        if input.ndim != 2 or target.ndim != 1 or target.dtype not in A.INT_DTYPES:
            raise UnsupportedOpError("cross_entropy is supported for [N, C] logits and [N] class indices")
        red = self._legacy_reduction(size_average, reduce, reduction)
        n, c = input.shape
        h = self.imp.hint
        lsm = self._softmax(input, 1, True)
        ii = int(ignore_index)
        # picked[n] = sum_c [c == target[n]] * logp[n, c] (a one-hot contraction, no gather)
        dt = stats_dtype(input)
        picked = self.b.reduce(f"{h}_nll", [n], [c], lambda o, r: B.select(
            B.cmp("==", r[0], target.at([o[0]])), B.neg(lsm.at([o[0], r[0]])), B.fconst(0.0)), "+", dtype=dt)
        pref = TensorRef(picked, [n], dt)
        valid = lambda idx: B.cmp("!=", target.at(idx), B.const(ii))  # noqa: E731
        elem = ExprVal([n], lambda idx: B.select(valid(idx), pref.at(idx), B.fconst(0.0)), dt)
        if red != "mean":
            return self._loss_reduce(elem, red)
        s = self.reduce(elem, None, False, "+", hint=f"{h}_sum")
        cnt = self.reduce(ExprVal([n], lambda idx: B.select(valid(idx), B.fconst(1.0), B.fconst(0.0)), dt), None, False,
                          "+", hint=f"{h}_count")
        return self.ew([s, cnt], B.div, shape=())

    @function('cosine_similarity')
    def f_cosine_similarity(self, x1, x2, dim=1, eps=1e-8):
        shape = broadcast_shapes(x1.shape, x2.shape)
        d = norm_dim(dim, len(shape))
        h = self.imp.hint
        dt = stats_dtype(x1, x2)
        a = ExprVal(shape, lambda idx: bcast_at(x1, shape, idx), dt)
        b = ExprVal(shape, lambda idx: bcast_at(x2, shape, idx), dt)
        dot = self.reduce(ExprVal(shape, lambda idx: B.mul(a.at(idx), b.at(idx)), dt), [d], False, "+", hint=f"{h}_dot")
        n1 = self.reduce(a, [d], False, "+", term=square_expr, hint=f"{h}_sq1")
        n2 = self.reduce(b, [d], False, "+", term=square_expr, hint=f"{h}_sq2")
        e = B.fconst(float(eps))
        return self.ew([dot, n1, n2], lambda p, q, r: B.div(p, B.mul(B.call("max", B.call("sqrt", q), e),
                                                                     B.call("max", B.call("sqrt", r), e))),
                       shape=dot.shape)

    @function('pairwise_distance')
    def f_pairwise_distance(self, x1, x2, p=2.0, eps=1e-6, keepdim=False):
        shape = broadcast_shapes(x1.shape, x2.shape)
        diff = ExprVal(shape, lambda idx: B.add(B.sub(bcast_at(x1, shape, idx), bcast_at(x2, shape, idx)),
                                               B.fconst(float(eps))), stats_dtype(x1, x2))
        return self._pnorm_lastdim(diff, p, keepdim)

    def _pnorm_lastdim(self, diff: Val, p, keepdim):
        h = self.imp.hint
        d = diff.ndim - 1
        if p in (2, 2.0):
            s = self.reduce(diff, [d], keepdim, "+", term=square_expr, hint=f"{h}square_expr")
            return self.ew([s], lambda e: B.call("sqrt", e), shape=s.shape, hint=h)
        if p in (1, 1.0):
            return self.reduce(diff, [d], keepdim, "+", term=lambda e: B.call("abs", e), hint=h)
        if isinstance(p, (int, float)) and p > 0:
            s = self.reduce(diff, [d], keepdim, "+", term=lambda e: B.binop("**", B.call("abs", e), B.fconst(float(p))),
                            hint=f"{h}_pow")
            return self.ew([s], lambda e: B.binop("**", e, B.fconst(1.0 / p)), shape=s.shape, hint=h)
        raise UnsupportedOpError(f"p-norm distance with p={p}")

    @function('triplet_margin_loss')
    def f_triplet_margin_loss(self, anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                              size_average=None, reduce=None, reduction="mean"):
        red = self._legacy_reduction(size_average, reduce, reduction)
        h = self.imp.hint
        dap = self.f_pairwise_distance(anchor, positive, p, eps)
        dan = self.f_pairwise_distance(anchor, negative, p, eps)
        if swap:
            dpn = self.f_pairwise_distance(positive, negative, p, eps)
            dan = self.ew([dan, dpn], lambda a, b: B.call("min", a, b), shape=dan.shape, hint=f"{h}_dneg")
        m = float(margin)
        elem = ExprVal(dap.shape, lambda idx: B.call("max", B.add(B.sub(dap.at(idx), dan.at(idx)), B.fconst(m)),
                                                     B.fconst(0.0)), stats_dtype(dap, dan))
        return self._loss_reduce(elem, red)

    @function('cosine_embedding_loss')
    def f_cosine_embedding_loss(self, input1, input2, target, margin=0.0, size_average=None, reduce=None,
                                reduction="mean"):
        red = self._legacy_reduction(size_average, reduce, reduction)
        h = self.imp.hint
        d = input1.ndim - 1
        dot = self.reduce(ExprVal(input1.shape, lambda idx: B.mul(input1.at(idx), input2.at(idx)),
                                  stats_dtype(input1, input2)), [d], False, "+",
                          hint=f"{h}_dot")
        m1 = self.reduce(input1, [d], False, "+", term=square_expr, hint=f"{h}_sq1")
        m2 = self.reduce(input2, [d], False, "+", term=square_expr, hint=f"{h}_sq2")
        epsv = B.fconst(1e-12)
        cos = self.ew([dot, m1, m2], lambda p, a, b: B.div(p, B.call("sqrt", B.mul(B.add(a, epsv), B.add(b, epsv)))),
                      shape=dot.shape, hint=f"{h}_cos")
        mg = float(margin)

        def f(c, t):
            pos = B.select(B.cmp("==", t, B.fconst(1.0)), B.sub(B.fconst(1.0), c), B.fconst(0.0))
            neg = B.select(B.cmp("==", t, B.neg(B.fconst(1.0))), B.call("max", B.sub(c, B.fconst(mg)), B.fconst(0.0)),
                           B.fconst(0.0))
            return B.add(pos, neg)

        return self._loss_reduce(self._pointwise2(cos, target, f), red)

    @function('margin_ranking_loss')
    def f_margin_ranking_loss(self, input1, input2, target, margin=0.0, size_average=None, reduce=None,
                              reduction="mean"):
        red = self._legacy_reduction(size_average, reduce, reduction)
        shape = broadcast_shapes(input1.shape, input2.shape, target.shape)
        elem = ExprVal(shape, lambda idx: B.call("max", B.add(B.mul(B.neg(bcast_at(target, shape, idx)), B.sub(
            bcast_at(input1, shape, idx), bcast_at(input2, shape, idx))), B.fconst(float(margin))), B.fconst(0.0)),
            stats_dtype(input1, input2))
        return self._loss_reduce(elem, red)

    # ------------------------------------------------------------------
    # modules

    def _p(self, q: str, mod, attr: str):
        t = getattr(mod, attr, None)
        if t is None:
            return None
        return self.imp.param(f"{q}.{attr}" if q else attr, t)
