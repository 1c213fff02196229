"""Constraint embedding: per-call time and scaling, in one process, timed in alternation.

Run from the repository root::

    python benchmarks/bench_embedding.py            # N = 1 … 256
    python benchmarks/bench_embedding.py --quick    # fewer repeats, N up to 64

For each model the state is consistent (``q0``, actuated velocities completed) and
every timed method's q̈ is first checked against the dense oracle (``augmented``).
Timed with the process CPU clock (``time.process_time``: on a shared machine the wall
clock also counts the time other processes hold the cores; ``--wall`` for the wall
clock), in alternation (A B C A B C …, ``repeat`` rounds), per call: the minimum over
the rounds, and the median:

- ``embedding``: ``ld.forward_dynamics(..., method="embedding")`` (the public call:
  the bound entry, two allocations, the result object); ``entry``: the bound compiled
  call alone (``Data.bound["embedding"]``), to separate the Python cost;
- ``aba``: ``ld.aba`` on the same spanning tree with the loops ignored (the O(n) floor);
- up to ``--dense-max``: every other method of ``ld.forward_dynamics`` (augmented, slm,
  sslm, recursive_lambda) and, if Pinocchio is installed and the model exports (no
  couplings), ``pin.constraintDynamics`` (``StdVec`` containers,
  ProximalSettings(1e-12, 1e-8, 20)).

Families: ``four_bar``; ``four_bar_chain(N)`` and ``geared_chain(N)``, N = 1, 2, 4, …
256.  The log-log slope of the embedding time over N ≥ 16 is printed per family.

``--chain 16,64,256,512`` instead: on ``four_bar_chain(N)`` only, the bound compiled calls
of ``embedding`` and ``rcr`` (``Data.bound``, the fast path) and ``ld.aba`` on the same
tree, timed in alternation (``timing.alternate``, 7 rounds, process CPU time): median µs
per call and per four-bar, the ratios to ``ld.aba`` as median [min–max] over the rounds,
and the log-log slope of each over the N given (issue 41: a super-linear term showed as
a growing ratio, 2.2 → 4.4 from N = 16 to 512).
"""

import argparse
import sys
import time
import timeit
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import loopdyn as ld
import timing
from bench_tree import _calls_per_run
from loopdyn.kernels import tiers

tiers.set_policy("compiled")  # time the compiled tier (first calls compile)


def alternate(fns, repeat, min_time, timer=time.process_time):
    """[(min, median)] per-call µs of each function, timed in alternation."""
    for f in fns:  # warm up: load compiled kernels before counting calls per run
        f()
    timers = [timeit.Timer(f, timer=timer) for f in fns]
    ns = [_calls_per_run(f, min_time) for f in fns]
    runs = [[] for _ in fns]
    for _ in range(repeat):
        for t, n, r in zip(timers, ns, runs, strict=True):
            r.append(1e6 * t.timeit(n) / n)
    return [(float(np.min(r)), float(np.median(r))) for r in runs]


def state(model, seed=0):
    rng = np.random.default_rng(seed)
    v = np.zeros(model.nv)
    v[model.actuated] = rng.normal(size=model.actuated.size)
    q = np.array(model.q0)
    v = ld.complete_velocity(model, q, v)
    tau = np.zeros(model.nv)
    tau[model.actuated] = rng.normal(size=model.actuated.size)
    return q, v, tau


def _pin_call(model, q, v, tau):
    return timing.pinocchio_call(model, q, v, tau)


TIMER = time.process_time


def measure(model, repeat, min_time, dense):
    """{name: (min, median)} µs for one model, after checking every method's q̈."""
    q, v, tau = state(model)
    exact = ld.forward_dynamics(model, q, v, tau, method="augmented").qdd
    scale = max(1.0, np.abs(exact).max())
    d = model.data
    res = ld.forward_dynamics(model, q, v, tau, method="embedding", data=d)
    err = np.abs(res.qdd - exact).max() / scale
    assert res.method == "embedding" and err < 1e-9, f"{model.name}: embedding off by {err:.2e}"
    bound = d.bound["embedding"][0]
    out, lam = np.empty(model.nv), np.empty(model.m)
    fns = {
        "embedding": lambda: ld.forward_dynamics(model, q, v, tau, method="embedding", data=d),
        "entry": lambda: bound(q, v, tau, out, lam),
        "aba": lambda: ld.aba(model, q, v, tau, data=d),
    }
    if dense:
        for m in (m for m in ld.methods.dynamics.METHODS if m != "embedding"):
            try:  # methods with a class of their own (denoc: parallel mechanisms) may refuse
                res = ld.forward_dynamics(model, q, v, tau, method=m).qdd
            except ld.ModelError:
                continue
            assert np.abs(res - exact).max() / scale < 1e-9, m
            fns[m] = lambda m=m: ld.forward_dynamics(model, q, v, tau, method=m)
        call, ex = _pin_call(model, q, v, tau)
        if call is not None:
            res = ex.v_from(call())
            perr = np.abs(res - exact).max() / scale
            if perr < 1e-8:
                fns["pin"] = call
            else:
                print(f"  ({model.name}: pin.constraintDynamics off by {perr:.1e}, not timed)")
    t = alternate(list(fns.values()), repeat, min_time, TIMER)
    return dict(zip(fns, t, strict=True))


def family(label, make, Ns, repeat, min_time, dense_max):
    print(f"\n{label}")
    names = None
    series = []
    for N in Ns:
        model = make(N)
        row = measure(model, repeat, min_time, N <= dense_max)
        if names is None:
            names = list(row)
            print(f"{'N':>4}{'nv':>6}" + "".join(f"{n:>22}" for n in names) + f"{'emb/aba':>9}")
        cells = "".join(
            f"{f'{row[n][0]:.2f} ({row[n][1]:.2f})':>22}" if n in row else f"{'':>22}"
            for n in names
        )
        extra = [n for n in row if n not in names]
        if extra:
            cells += "  " + ", ".join(f"{n} {row[n][0]:.2f}" for n in extra)
        print(f"{N:>4}{model.nv:>6}{cells}{row['embedding'][0] / row['aba'][0]:>9.2f}")
        series.append((N, row["embedding"][0], row["entry"][0], row["aba"][0]))
    arr = np.array(series, dtype=float)
    sel = arr[:, 0] >= 16
    if sel.sum() >= 2:
        lx = np.log(arr[sel, 0])
        slopes = [np.polyfit(lx, np.log(arr[sel, k]), 1)[0] for k in (1, 2, 3)]
        print(
            "log-log slope over N >= 16: embedding {:.3f}, entry {:.3f}, aba {:.3f}".format(*slopes)
        )
    return series


def _chain_times(N, rounds, min_time):
    """(model, rounds × 3 µs) of embedding's and rcr's bound calls and ld.aba, alternated."""
    model = ld.examples.four_bar_chain(N)
    q, v, tau = state(model)
    d = model.data
    exact = ld.forward_dynamics(model, q, v, tau, method="augmented").qdd
    fns = []
    for m in ("embedding", "rcr"):
        res = ld.forward_dynamics(model, q, v, tau, method=m, data=d)
        err = np.abs(res.qdd - exact).max() / max(1.0, np.abs(exact).max())
        assert res.method == m and err < 1e-9, f"N={N}: {m} off by {err:.1e}"
        bound = d.bound[m][0]
        out, lam = np.empty(model.nv), np.empty(model.m)
        fns.append(lambda b=bound, out=out, lam=lam: b(q, v, tau, out, lam))
    fns.append(lambda: ld.aba(model, q, v, tau, data=d))
    return model, timing.alternate(fns, rounds, min_time)


def chain_scaling(Ns, rounds=7, min_time=0.02):
    """``--chain``: embedding and rcr (bound calls) against ld.aba on four_bar_chain(N)."""
    timing.use_cpu_time()
    names = ("embedding", "rcr", "aba")
    print(f"four_bar_chain(N), bound calls; process CPU time, {rounds} rounds alternated;")
    print("median µs (µs per four-bar); x/aba median [min–max] over the rounds")
    series = []
    for N in Ns:
        model, t = _chain_times(N, rounds, min_time)
        med = [timing.median_us(t, k) for k in range(3)]
        cells = "  ".join(f"{n} {x:.1f} ({x / N:.2f})" for n, x in zip(names, med, strict=True))
        ratios = "  ".join(
            f"{n}/aba {timing.fmt_ratio(timing.ratio(t, k, 2))}" for k, n in enumerate(names[:2])
        )
        print(f"N = {N:>4} (nv = {model.nv}): {cells}  {ratios}", flush=True)
        series.append([N, *med])
    arr = np.array(series, dtype=float)
    if len(arr) >= 2:
        lx = np.log(arr[:, 0])
        s = [np.polyfit(lx, np.log(arr[:, k]), 1)[0] for k in (1, 2, 3)]
        Ntxt = ", ".join(str(int(n)) for n in arr[:, 0])
        print(f"log-log slope over N = {Ntxt}: ", end="")
        print(f"embedding {s[0]:.3f}, rcr {s[1]:.3f}, aba {s[2]:.3f}")


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="fewer repeats, N up to 64")
    ap.add_argument("--dense-max", type=int, default=64, help="largest N for dense methods")
    ap.add_argument("--wall", action="store_true", help="time with the wall clock")
    ap.add_argument("--chain", type=str, default=None, help="N list: embedding, rcr vs aba only")
    args = ap.parse_args(argv)
    if args.chain:
        chain_scaling([int(x) for x in args.chain.split(",")])
        return
    global TIMER
    TIMER = time.perf_counter if args.wall else time.process_time
    print(f"timer: {'wall time' if args.wall else 'process CPU time'}; per call µs, min (median)")
    repeat, min_time = (5, 0.05) if args.quick else (9, 0.1)
    Ns = [1, 2, 4, 8, 16, 32, 64] + ([] if args.quick else [128, 256])
    fb = ld.examples.four_bar()
    row = measure(fb, repeat, min_time, True)
    print("four_bar: " + ", ".join(f"{n} {lo:.2f} ({med:.2f}) µs" for n, (lo, med) in row.items()))
    family("four_bar_chain(N)", ld.examples.four_bar_chain, Ns, repeat, min_time, args.dense_max)
    family("geared_chain(N)", ld.examples.geared_chain, Ns, repeat, min_time, args.dense_max)


if __name__ == "__main__":
    main()
