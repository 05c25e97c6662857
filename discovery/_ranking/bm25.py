"""BM25+ of contract §4: the constants and one small pure function per formula term.

The ranker applies them to arrays of postings and ``explain`` to single numbers; both evaluate
in the reference's order of operations, so equal inputs give bit-identical doubles, which is
what makes score ties reproducible.
"""

from __future__ import annotations

import functools
import math
import struct
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import numpy as np

K1 = 1.2
B = 0.75
DELTA = 1.0

Number = TypeVar("Number", float, "np.ndarray")


@functools.lru_cache(maxsize=1 << 16)
def idf(n_docs: int, df: int) -> float:
    """``ln(1 + (N − df + 0.5) / (df + 0.5))``, with the reference's ``ln`` (see ``js_log``).

    Cached: ``js_log`` is plain Python, and a search asks for a few terms' idf in
    a corpus whose ``N`` and ``df`` recur from search to search."""
    return js_log(1 + (n_docs - df + 0.5) / (df + 0.5))


_LN2_HI, _LN2_LO, _TWO54 = 6.93147180369123816490e-01, 1.90821492927058770002e-10, 1.80143985094819840000e16
_LG = (
    6.666666666666735130e-01,
    3.999999999940941908e-01,
    2.857142874366239149e-01,
    2.222219843214978396e-01,
    1.818357216161805012e-01,
    1.531383769920937332e-01,
    1.479819860511658591e-01,
)


def js_log(x: float) -> float:
    """JavaScript's ``Math.log``: V8 computes it with fdlibm's ``__ieee754_log``, ported here.

    The platform ``math.log`` is closer to correctly rounded and differs from it by one ulp on
    a small share of arguments; the reference's scores (and so its ties) are fdlibm's.

    Port of fdlibm 5.3 e_log.c. Copyright (C) 1993 by Sun Microsystems, Inc. All rights reserved.
    Developed at SunSoft, a Sun Microsystems, Inc. business. Permission to use, copy, modify, and
    distribute this software is freely granted, provided that this notice is preserved.
    """
    bits = struct.unpack("<q", struct.pack("<d", x))[0]
    hx, lx, k = bits >> 32, bits & 0xFFFFFFFF, 0
    if hx < 0x00100000:  # zero, negative or subnormal
        if (hx & 0x7FFFFFFF) | lx == 0:
            return -math.inf
        if hx < 0:
            return math.nan
        k, x = -54, x * _TWO54
        bits = struct.unpack("<q", struct.pack("<d", x))[0]
        hx = bits >> 32
    if hx >= 0x7FF00000:
        return x + x
    k += (hx >> 20) - 1023
    hx &= 0x000FFFFF
    i = (hx + 0x95F64) & 0x100000
    k += i >> 20
    x = struct.unpack("<d", struct.pack("<q", ((hx | (i ^ 0x3FF00000)) << 32) | (bits & 0xFFFFFFFF)))[0]
    f, dk = x - 1.0, float(k)
    if (0x000FFFFF & (2 + hx)) < 3:  # -2**-20 <= f < 2**-20
        if f == 0.0:
            return 0.0 if k == 0 else dk * _LN2_HI + dk * _LN2_LO
        r = f * f * (0.5 - 0.33333333333333333 * f)
        return f - r if k == 0 else dk * _LN2_HI - ((r - dk * _LN2_LO) - f)
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (_LG[1] + w * (_LG[3] + w * _LG[5]))
    t2 = z * (_LG[0] + w * (_LG[2] + w * (_LG[4] + w * _LG[6])))
    r = t2 + t1
    if ((hx - 0x6147A) | (0x6B851 - hx)) > 0:
        hfsq = 0.5 * f * f
        if k == 0:
            return f - (hfsq - s * (hfsq + r))
        return dk * _LN2_HI - ((hfsq - (s * (hfsq + r) + dk * _LN2_LO)) - f)
    if k == 0:
        return f - s * (f - r)
    return dk * _LN2_HI - ((s * (f - r) - dk * _LN2_LO) - f)


def length_norm(doc_len: Number, avgdl: float) -> Number:
    """``k1 · (1 − b + b · (len / avgdl))``, for one length or an array of them."""
    return K1 * (1 - B + B * (doc_len / avgdl))


def saturation_numerator(tf: Number) -> Number:
    """``tf · (k1 + 1)``: the part of a term's contribution that no corpus changes."""
    return tf * (K1 + 1)


def contribution(weight: float, numerator: Number, tf: Number, norm: Number) -> Number:
    """``weight · (numerator / (tf + norm) + δ)``, where ``weight`` is ``qtf · idf`` and
    ``numerator`` is ``saturation_numerator(tf)``: what a matched term adds to a score."""
    added: Number = weight * (numerator / (tf + norm) + DELTA)
    return added


def term_score(qtf: int, idf_value: float, tf: float, norm: float) -> float:
    """One matched query term: ``contribution`` at weight ``qtf · idf``."""
    return contribution(qtf * idf_value, saturation_numerator(tf), tf, norm)


def term_upper_bound(qtf: int, idf_value: float, max_tf: float) -> float:
    """The largest contribution a term can make to any document: its best tf at length 0.

    ``term_score`` grows with tf and shrinks as the document gets longer, so no document can
    exceed this; pruning may use it to skip work without changing a result.
    """
    return term_score(qtf, idf_value, max_tf, length_norm(0.0, 1.0))


def average_length(n_docs: int, total_len: float) -> float:
    """Mean document length, or ``1`` when the corpus is empty or the mean is 0."""
    if n_docs <= 0:
        return 1.0
    mean = total_len / n_docs
    return mean if mean > 0 else 1.0


def round6(score: float) -> float:
    """Round to 6 decimals as the reference reports scores (half away from zero)."""
    return math.floor(score * 1_000_000 + 0.5) / 1_000_000
