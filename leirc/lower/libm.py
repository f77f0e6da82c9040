"""Transcendentals that the CPU lowering computes inline instead of calling libm.

TVM lowers ``exp`` on llvm to LLVM's ``llvm.exp`` intrinsic, and LLVM has no vector library
configured (TVM's ``cl-opt`` cannot set the enum option ``-vector-library``), so a vectorized
loop pays one scalar ``expf`` call per lane; ``erf`` has no vector form at all (a ``V`` loop
becomes the scalar loop). -O2 softmax ran at 0.23x PyTorch eager and gelu at 0.12x, most of
the gap in those calls. :func:`exp_f32`, :func:`erf_f32`, :func:`log_f32` and :func:`tanh_f32` are pure arithmetic, so TVM's
vectorizer (``V`` loops) and LLVM's loop vectorizer turn them into vector code. Measured on 4M
elements, inputs in [-20, 5] (exp) and [-3, 3] (erf), AVX-512: the f64 exp was 4.5x faster than the
libm calls at 2 threads (9.8x when a tenth of the results are subnormal), the f32 exp that replaced it
1.9x faster again at one thread (memory-bound there: 0.88 ms per 2^21 elements, a copy 0.59), the f64 erf 11x
the libm calls at one thread.

:func:`exp_f32` is f32 arithmetic (16 lanes per AVX-512 vector): Cody-Waite reduction ``x = k ln2 +
r`` with Cephes' split of ln 2 (``k * LN2_HI_F32`` exact), ``e^r = 1 + r + r^2 Q(r)`` with a degree-5
``Q`` (so the last, dominant rounding is of ``1 + small``), and ``2^k`` built from exponent bits; a
subnormal result is assembled from the significand bits in integer arithmetic, because a multiply
with a subnormal product costs a microcode assist per lane. It is faithful: at most 1 ulp from the
correctly rounded ``expf(x)`` on every input (the error budget: 0.5 ulp for the final rounding, up
to 0.25 each for the rounding of ``r`` and of ``r + r^2 Q``, 0.002 for the polynomial), equal to it
on ~95% of them -- the accuracy of PyTorch's vectorized exp (Sleef, 1.0 ulp), where glibc's
scalar ``expf`` is correctly rounded. Overflow (``x > 88.72...`` to ``inf``), underflow to
subnormals and zero, ``+-inf`` and NaN follow IEEE. It replaced an f64 version (correctly rounded
but for near-midpoints) that ran at half the vector width: softmax at -O2 spent 2.5 of its 5.4 ms
in it. ``tests/test_lower_libm.py`` checks it against f64 ``exp`` rounded to f32 on millions of
inputs, subnormal results included, and against glibc's ``expf``. The f64 ``e^x`` behind
:func:`tanh_f32` (degree-13 Taylor after the same reduction in f64, within ~1e-15 relative)
stays: tanh cancels near 0 and keeps its correctly rounded results.

:func:`erf_f32` is f32 arithmetic too: ``x + x P(x^2)`` below |x| = ERF_SPLIT (0.92) and
``1 - e^{Q(|x| - ERF_SPLIT)}`` above, with the sign of ``x`` (``Q`` approximates log erfc, so the
exponential is the part that needs relative accuracy: erfc falls to 2^-25 by 3.9, where erf rounds
to 1), ``e^Q`` by the reduction of :func:`exp_f32` (always a normal number there). At most 1 ulp
from the correctly rounded result, ~96% exact; it replaced two f64 polynomials of degrees 9 and 22,
both evaluated for every lane, at half the vector width (correctly rounded but for near-midpoints).
:func:`tanh_f32` is ``1 - 2 / (e^{2|x|} + 1)``
on the f64 exp above (with the sign of ``x``), and its odd Taylor series below |x| = 1/16, where that
form would cancel: within ~2e-14 relative before the rounding to f32, tested like erf. (TVM's own
``tanh`` is two f32 ``exp`` calls, scalar here, and cancels near 0.) :func:`log_f32` splits the
exponent off the f64 bits and sums ``2 atanh(s)`` as an odd series (0 ulp from the correctly rounded
log on the tested inputs but for near-midpoint cases).
"""

from __future__ import annotations

import math

#: ln 2 with its low 32 bits cleared (21 significant bits): ``k * LN2_HI`` is exact for |k| < 2^31
LN2_HI = 0.693147180369123816490173339843750
LN2_LO = math.log(2.0) - LN2_HI
#: |x| clamp in f64: e^200 overflows f32 and e^-200 underflows it, and k stays within f64's exponent range
CLAMP = 200.0
TAYLOR_DEGREE = 13

#: erf(x) = x + x P(x^2) below ERF_SPLIT: monomial coefficients (in u = x^2, rounded to f32) of a
#: degree-6 Chebyshev interpolant of erf(sqrt(u)) / sqrt(u) - 1 on [0, ERF_SPLIT^2] (numpy ``chebfit``
#: at 2000 nodes against mpmath, ``cheb2poly``): 4.1e-10 relative error. The constant term is
#: 2/sqrt(pi) - 1, so the last rounding is of ``x + 0.128 x``-sized terms, not of a product.
ERF_SPLIT = 0.921875
ERF_SMALL = (
    0.12837916612625122, -0.37612634897232056, 0.11283700168132782, -0.026859646663069725,
    0.005201591644436121, -0.0008148506167344749, 8.392696327064186e-05,
)
#: erf(t) = 1 - e^{Q(t - ERF_SPLIT)} for ERF_SPLIT <= t <= ERF_CLAMP: monomial coefficients in
#: ``d = t - ERF_SPLIT`` (rounded to f32) of a degree-8 Chebyshev interpolant of log(erfc(t)) on
#: that interval, 8.8e-9 absolute. In ``d`` the terms hardly cancel (in the Chebyshev variable
#: they do: 4 ulp near the split); past ERF_CLAMP erfc < 2^-25 and erf rounds to 1.
ERF_CLAMP = 3.925
ERF_LARGE = (
    -1.6485618352890015, -2.5080130100250244, -0.8329834938049316, -0.04484977573156357,
    0.010906658135354519, -0.002206946024671197, 0.0003380918933544308, -3.393066435819492e-05,
    1.6355552361346781e-06,
)


def _once(fn):
    """Evaluate the argument once: these functions read ``x`` several times (the NaN test, the
    sign, the range checks), and a TIR expression used twice is two copies of its tree; nested
    calls (``log(1 + exp(x))`` in a fused chain of activations) multiplied a 1.6 KB LEIR body into
    1 MB of TIR that ran 50x slower. A ``Let`` binds it to one variable. Only the argument: a
    ``Let`` per intermediate (the reduced argument, each Horner variable) made TVM's vectorizer
    take minutes on two nested calls (it revisits a ``Let``'s body, so the cost doubles per level)."""

    def bound(tirx, x):
        if isinstance(x, (tirx.Var, tirx.FloatImm)):
            return fn(tirx, x)
        v = tirx.Var("libm_x", "float32")  # every caller passes an f32 scalar expression
        return tirx.Let(v, x, fn(tirx, v))

    bound.__name__, bound.__doc__, bound.__qualname__ = fn.__name__, fn.__doc__, fn.__qualname__
    return bound


def _exp_f64(tirx, xd):
    """``e^x`` of a float64 TIR expression within ~1e-15 relative, ``x`` clamped to
    [-CLAMP, CLAMP] (a NaN operand is dropped by the clamp: callers pass NaN through)."""
    f64, i64 = "float64", "int64"
    xc = tirx.min(tirx.max(xd, tirx.const(-CLAMP, f64)), tirx.const(CLAMP, f64))
    k = tirx.floor(xc * tirx.const(1.0 / math.log(2.0), f64) + tirx.const(0.5, f64))
    r = (xc - k * tirx.const(LN2_HI, f64)) - k * tirx.const(LN2_LO, f64)
    p = _horner(tirx, [1.0 / math.factorial(n) for n in range(TAYLOR_DEGREE + 1)], r, f64)
    two_k = tirx.reinterpret(f64, (tirx.Cast(i64, k) + tirx.const(1023, i64)) << tirx.const(52, i64))
    return p * two_k


#: ln 2 split for the f32 reduction (Cephes): a 9-bit high part, so ``k * LN2_HI_F32`` is exact for
#: |k| < 2^15, and the rest
LN2_HI_F32 = 0.693359375
LN2_LO_F32 = math.log(2.0) - LN2_HI_F32
#: e^r = 1 + r + r^2 Q(r) on |r| <= ln2/2 (1% margin): monomial coefficients of a degree-5 Chebyshev
#: interpolant of (e^r - 1 - r) / r^2 (numpy ``chebfit`` at 2000 nodes against mpmath, rounded to
#: f32), 1.8e-10 absolute error of r^2 Q(r) on the interval
EXP_Q = (0.5, 0.1666666716337204, 0.04166645556688309, 0.008333297446370125, 0.0013934541493654251,
         0.00019900451297871768)
#: x clamp in f32: e^89 overflows and e^-104 is below half the smallest subnormal
EXP_F32_MAX, EXP_F32_MIN = 89.0, -104.0


def _exp_f32_parts(tirx, x):
    """``e^x = p * 2^k`` for a finite f32 ``x`` with |x| < 2^15 ln 2: ``p`` in [0.7, 1.42] (f32),
    ``k`` an int32."""
    f = "float32"
    kf = tirx.floor(x * tirx.const(1.0 / math.log(2.0), f) + tirx.const(0.5, f))
    r = (x - kf * tirx.const(LN2_HI_F32, f)) - kf * tirx.const(LN2_LO_F32, f)
    p = tirx.const(1.0, f) + (r + (r * r) * _horner(tirx, EXP_Q, r, f))
    return p, tirx.Cast("int32", kf)


@_once
def exp_f32(tirx, x):
    """``e^x`` of a float32 TIR expression in f32 arithmetic (16 lanes per AVX-512 vector, twice
    the f64 version's): at most 1 ulp from the correctly rounded result, equal to it on ~95% of
    the inputs (module docstring)."""
    f, i = "float32", "int32"

    def c(v):
        return tirx.const(v, f)

    def n(v):
        return tirx.const(v, i)

    p, k = _exp_f32_parts(tirx, tirx.min(tirx.max(x, c(EXP_F32_MIN)), c(EXP_F32_MAX)))
    # a normal result is p * 2^k exactly, as (2p) * 2^(k-1) so that k = 128 still has a scale
    kn = tirx.max(k, n(-125)) - n(1)
    normal = (p + p) * tirx.reinterpret(f, (kn + n(127)) << n(23))
    # a subnormal result (k <= -126) is p's 24-bit significand shifted right by 1 - E - k (E:
    # p's biased exponent) and rounded, in integer arithmetic: a multiply with a subnormal
    # product is a microcode assist per lane (9x slower with a tenth of them)
    pb = tirx.reinterpret(i, p)
    sig = tirx.bitwise_or(tirx.bitwise_and(pb, n(0x7FFFFF)), n(0x800000))
    sh = n(1) - tirx.shift_right(pb, n(23)) - k
    sub = tirx.reinterpret(f, tirx.shift_right(tirx.shift_right(sig << n(1), sh) + n(1), n(1)))
    # max/min drop a NaN operand (LLVM's maxnum), so a NaN input is passed through explicitly
    return tirx.Select(tirx.isnan(x), x, tirx.Select(k <= n(-126), sub, normal))


#: log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 3 - 2 sqrt(2) = 0.1716 for m in
#: [sqrt(1/2), sqrt(2)): the series to s^21 leaves 0.1716^22 / 23 ~ 6e-19 relative
LOG_SERIES = tuple(2.0 / (2 * n + 1) for n in range(11))


@_once
def log_f32(tirx, x):
    """``log(x)`` of a float32 TIR expression in f64 arithmetic (LLVM's ``llvm.log`` is one
    scalar ``logf`` call per lane here). ``x = 2^k m`` from the f64 bits (an f32 subnormal is a
    normal f64, so it needs no case of its own), ``m`` in [sqrt(1/2), sqrt(2)), ``log x = k ln 2 +
    2 atanh((m - 1) / (m + 1))``; ``m - 1`` is exact, so the result stays relatively accurate
    near ``x = 1``. ``log(0) = -inf``, negative inputs give NaN, ``log(inf) = inf``, NaN passes."""
    f64, i64 = "float64", "int64"
    xd = tirx.Cast(f64, x)
    bits = tirx.reinterpret(i64, xd)
    k = tirx.Cast(i64, tirx.shift_right(bits, tirx.const(52, i64))) - tirx.const(1023, i64)
    mant = tirx.bitwise_or(tirx.bitwise_and(bits, tirx.const((1 << 52) - 1, i64)), tirx.const(1023 << 52, i64))
    m = tirx.reinterpret(f64, mant)  # [1, 2)
    big = m > tirx.const(math.sqrt(2.0), f64)
    m = tirx.Select(big, m * tirx.const(0.5, f64), m)
    kd = tirx.Cast(f64, k) + tirx.Select(big, tirx.const(1.0, f64), tirx.const(0.0, f64))
    one = tirx.const(1.0, f64)
    sv = (m - one) / (m + one)
    logm = sv * _horner(tirx, LOG_SERIES, sv * sv, f64)
    res = kd * tirx.const(LN2_HI, f64) + (kd * tirx.const(LN2_LO, f64) + logm)
    zero = tirx.const(0.0, "float32")
    out = tirx.Cast("float32", res)
    out = tirx.Select(x == zero, tirx.const(-math.inf, "float32"), out)
    out = tirx.Select(x < zero, tirx.const(math.nan, "float32"), out)
    out = tirx.Select(tirx.isinf(x) & (x > zero), x, out)
    return tirx.Select(tirx.isnan(x), x, out)


#: below this |x|, tanh is its odd Taylor series to x^11 (the next term, 21844/6081075 x^13, is
#: 1.3e-17 of x at x = 1/16); above, 1 - 2/(e^{2|x|} + 1) loses nothing to cancellation, the
#: result being at least tanh(1/16) = 0.0624
TANH_SERIES_BELOW = 0.0625
TANH_SERIES = (1.0, -1.0 / 3, 2.0 / 15, -17.0 / 315, 62.0 / 2835, -1382.0 / 155925)
#: tanh(20) is 1 - 8.5e-18: 1.0 in f64, and e^40 stays finite
TANH_CLAMP = 20.0


@_once
def tanh_f32(tirx, x):
    """``tanh(x)`` of a float32 TIR expression in f64 arithmetic (TVM legalizes ``tanh`` into two
    ``exp`` calls, scalar ``expf`` per lane here, in f32: ``1 - e^{-2x}`` cancels near 0).
    Within ~2e-14 relative of tanh before the one rounding to f32; odd, so ``-0.0`` stays."""
    f64 = "float64"
    xd = tirx.Cast(f64, x)
    t = tirx.abs(xd)
    one = tirx.const(1.0, f64)
    e = _exp_f64(tirx, tirx.const(2.0, f64) * tirx.min(t, tirx.const(TANH_CLAMP, f64)))
    large = one - tirx.const(2.0, f64) / (e + one)
    large = tirx.Select(xd < tirx.const(0.0, f64), -large, large)
    small = xd * _horner(tirx, TANH_SERIES, xd * xd, f64)
    res = tirx.Cast("float32", tirx.Select(t < tirx.const(TANH_SERIES_BELOW, f64), small, large))
    return tirx.Select(tirx.isnan(x), x, res)


def _horner(tirx, coefs, s, dtype):
    p = tirx.const(coefs[-1], dtype)
    for c in reversed(coefs[:-1]):
        p = p * s + tirx.const(c, dtype)
    return p


@_once
def erf_f32(tirx, x):
    """``erf(x)`` of a float32 TIR expression in f32 arithmetic (no call; TVM has no vector erf,
    and its scalar ``erff`` kept -O2 gelu at 0.12x PyTorch eager): at most 1 ulp from the correctly
    rounded result, equal to it on ~95% of the inputs (module docstring)."""
    f = "float32"

    def c(v):
        return tirx.const(v, f)

    t = tirx.abs(x)
    small = x + x * _horner(tirx, ERF_SMALL, x * x, f)  # odd: keeps -0.0
    # Q(d) lies in [-16.9, -1.64]: e^Q is a normal number, so the clamp and the subnormal case of
    # exp_f32 are not needed
    p, k = _exp_f32_parts(tirx, _horner(tirx, ERF_LARGE, tirx.min(t, c(ERF_CLAMP)) - c(ERF_SPLIT), f))
    large = c(1.0) - p * tirx.reinterpret(f, (k + tirx.const(127, "int32")) << tirx.const(23, "int32"))
    large = tirx.Select(x < c(0.0), -large, large)
    # min drops a NaN operand (LLVM's minnum), so a NaN input is passed through explicitly
    return tirx.Select(tirx.isnan(x), x, tirx.Select(t < c(ERF_SPLIT), small, large))


def sigmoid_f32(tirx, x):
    """``1 / (1 + e^-x)`` with :func:`exp_f32` (TVM's own sigmoid calls ``expf``)."""
    one = tirx.const(1.0, "float32")
    return one / (one + exp_f32(tirx, -x))
