"""Transcendentals that the CPU lowering computes inline instead of calling libm.

TVM lowers ``exp`` on llvm to LLVM's ``llvm.exp`` intrinsic, and LLVM has no vector library
configured (TVM's ``cl-opt`` cannot set the enum option ``-vector-library``), so a vectorized
loop pays one scalar ``expf`` call per lane; ``erf`` has no vector form at all (a ``V`` loop
becomes the scalar loop). -O2 softmax ran at 0.23x PyTorch eager and gelu at 0.12x, most of
the gap in those calls. :func:`exp_f32`, :func:`erf_f32`, :func:`log_f32` and :func:`tanh_f32` are pure arithmetic, so TVM's
vectorizer (``V`` loops) and LLVM's loop vectorizer turn them into vector code. Measured on 4M
elements, inputs in [-20, 5] (exp) and [-3, 3] (erf), AVX-512: exp 4.5x faster than the libm
calls at 2 threads (9.8x when a tenth of the results are subnormal), erf 11x at one thread.

Its numerics are libm's or better: the f32 argument is widened to f64, reduced by Cody-Waite
(``x = k ln2 + r``, ``|r| <= ln2/2``, the high part of ln2 has 21 significant bits so
``k * LN2_HI`` and the subtraction are exact), ``e^r`` is a degree-13 Taylor polynomial
(remainder ``< 0.347^14 / 14! ~ 4e-18``) and ``2^k`` is built from its exponent bits. The f64
result is within ~1e-15 relative of ``e^x``, so its rounding to f32 is the correctly rounded
``expf(x)`` except when ``e^x`` lies within that distance of a rounding midpoint (then at most
half an ulp plus 1e-15). Overflow (``x > 88.72...`` to ``inf``), underflow to subnormals and
zero, ``+-inf`` and NaN follow IEEE: the clamp to [-200, 200] keeps ``k`` a valid f64 exponent
and still overflows/underflows in the final conversion. ``tests/test_lower_libm.py`` checks
it against f64 ``exp`` rounded to f32 on millions of inputs (0 ulp apart on all of them) and
against glibc's ``expf``. :func:`erf_f32` evaluates two f64 polynomials (below and above
|x| = 1) within ~1e-13 of erf, so it is also correctly rounded but for near-midpoint cases; the
test allows 1 ulp and finds more than 99.99% exact. :func:`tanh_f32` is ``1 - 2 / (e^{2|x|} + 1)``
on the same f64 exp (with the sign of ``x``), and its odd Taylor series below |x| = 1/16, where that
form would cancel: within ~2e-14 relative before the rounding to f32, tested like erf. (TVM's own
``tanh`` is two f32 ``exp`` calls, scalar here, and cancels near 0.) :func:`log_f32` splits the
exponent off the f64 bits and sums ``2 atanh(s)`` as an odd series (0 ulp from the correctly rounded
log on the tested inputs but for near-midpoint cases, like exp).
"""

from __future__ import annotations

import math

#: ln 2 with its low 32 bits cleared (21 significant bits): ``k * LN2_HI`` is exact for |k| < 2^31
LN2_HI = 0.693147180369123816490173339843750
LN2_LO = math.log(2.0) - LN2_HI
#: |x| clamp in f64: e^200 overflows f32 and e^-200 underflows it, and k stays within f64's exponent range
CLAMP = 200.0
TAYLOR_DEGREE = 13

#: erf(t) = t * P(2 t^2 - 1) for |t| < 1 and erf(t) = Q((2 t - 5) / 3) for 1 <= t <= 4: monomial
#: coefficients of Chebyshev interpolants (numpy ``chebfit`` of mpmath's erf at 2000 Chebyshev
#: nodes, ``cheb2poly``; degrees 9 and 22). On a 20,001-point grid against mpmath: 2.1e-14
#: relative error below 1, 7.4e-14 absolute on [1, 4]. Past 4, erf rounds to +-1 in f32.
ERF_SMALL = (
    0.9654687386698855, -0.14053608902272136, 0.01985249668808311, -0.002285485561060075,
    0.00021751716323634783, -1.753716990793566e-05, 1.2233626094735958e-06, -7.511463366513152e-08,
    4.138781355991913e-09, -2.045754477653603e-10,
)
ERF_LARGE = (
    0.9995930479825608, 0.003267426347180774, -0.012252848797330993, 0.028181552083938147,
    -0.04365077375712515, 0.04645361682683836, -0.031876553431599675, 0.009267538045385717,
    0.006680706221940396, -0.009621498629844953, 0.004543994474409737, 0.0004430484573193525,
    -0.0018265004727905413, 0.0009163829852639469, 5.211460849732898e-05, -0.0002868278542374435,
    0.00011915647632454157, 2.472959196704935e-05, -3.678114220000541e-05, 4.70570980540423e-06,
    5.118159044428506e-06, -1.0777471698549667e-06, -2.915554974211716e-07,
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


@_once
def exp_f32(tirx, x):
    """``e^x`` of a float32 TIR expression: f64 arithmetic (no call) that TVM can vectorize."""
    e = _exp_f64(tirx, tirx.Cast("float64", x))
    # max/min drop a NaN operand (LLVM's maxnum), so a NaN input is passed through explicitly
    return tirx.Select(tirx.isnan(x), x, tirx.Cast("float32", e))


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
    """``erf(x)`` of a float32 TIR expression: f64 polynomials (no call; TVM has no vector
    erf, and its scalar ``erff`` kept -O2 gelu at 0.12x PyTorch eager)."""
    f64 = "float64"
    xd = tirx.Cast(f64, x)
    t = tirx.abs(xd)
    one = tirx.const(1.0, f64)
    small = xd * _horner(tirx, ERF_SMALL, tirx.const(2.0, f64) * xd * xd - one, f64)  # odd: keeps -0.0
    tl = tirx.min(t, tirx.const(4.0, f64))
    large = _horner(tirx, ERF_LARGE, tl * tirx.const(2.0 / 3.0, f64) - tirx.const(5.0 / 3.0, f64), f64)
    large = tirx.Select(xd < tirx.const(0.0, f64), -large, large)
    res = tirx.Cast("float32", tirx.Select(t < one, small, large))
    return tirx.Select(tirx.isnan(x), x, res)


def sigmoid_f32(tirx, x):
    """``1 / (1 + e^-x)`` with :func:`exp_f32` (TVM's own sigmoid calls ``expf``)."""
    one = tirx.const(1.0, "float32")
    return one / (one + exp_f32(tirx, -x))
