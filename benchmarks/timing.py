"""Alternated timing for the benchmarks: per-call medians and ratios with their spread.

The machines these run on are shared and noisy, so functions are never timed one
after the other: each round times every function once (A B C A B C ...), and a
ratio is taken within each round, so a change in load affects numerator and
denominator alike.  Reported: the median per-call time of each function and, for
each ratio, its median and min–max over the rounds.
"""

import timeit

import numpy as np


def calls_per_run(fn, min_time):
    """Number of calls of ``fn`` lasting about ``min_time`` seconds."""
    t = timeit.Timer(fn)
    n = 1
    while True:
        elapsed = t.timeit(n)
        if elapsed >= min_time:
            return n
        n = max(n * 2, int(n * min_time / max(elapsed, 1e-9) * 1.1))


def alternate(fns, rounds=21, min_time=0.02):
    """(rounds × len(fns)) array of per-call times in µs, timed in alternation."""
    timers = [timeit.Timer(f) for f in fns]
    ns = [calls_per_run(f, min_time) for f in fns]
    out = np.empty((rounds, len(fns)))
    for r in range(rounds):
        for k, (t, n) in enumerate(zip(timers, ns, strict=True)):
            out[r, k] = 1e6 * t.timeit(n) / n
    return out


def ratio(times, k, ref):
    """(median, min, max) over the rounds of times[:, k] / times[:, ref]."""
    x = times[:, k] / times[:, ref]
    return float(np.median(x)), float(x.min()), float(x.max())


def fmt_ratio(r):
    return f"{r[0]:.2f} ({r[1]:.2f}–{r[2]:.2f})"


def median_us(times, k):
    return float(np.median(times[:, k]))
