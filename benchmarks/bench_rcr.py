"""Recursive Coordinate Reduction: per-call time on ``spatial_ladder(L)``, L = 8 … 1024.

Run from the repository root::

    python benchmarks/bench_rcr.py               # L = 8 … 1024
    python benchmarks/bench_rcr.py --quick       # fewer rounds, L up to 256

One process, every function timed in alternation (``timing.alternate``: A B C A B C …,
``--rounds`` rounds), process CPU time (``--wall`` for the wall clock).  Reported per L:
the median per-call µs of each function, and the ratio of ``rcr`` to each of them as
median [min–max] over the rounds.  Timed:

- ``rcr``: ``ld.forward_dynamics(..., method="rcr")`` (the public call); ``entry``: the
  bound compiled call alone (``Data.bound["rcr"]``);
- ``aba``: ``ld.aba`` on ``spatial_ladder_tree(L)``, the ladder's open tree (the
  loops cut: same bodies, joints and state);
- every other loopdyn method that applies (augmented, slm, sslm, recursive_lambda,
  embedding; denoc refuses the ladder), dropped for the larger L once one call takes
  more than ``--max-call`` s (0.1);
- ``pin.constraintDynamics`` and ``pin.lcaba`` (``computeJointMinimalOrdering`` first)
  with ``StdVec`` containers, ProximalSettings(1e-12, 1e-8, 20) and (1e-12, 1e-4, 2000)
  (lcaba: mu = 1e-4 is its most accurate setting per µs here, ~1e-8 in 16 iterations;
  mu = 1e-3 needs 76);
  each answer is checked against ours and its error printed; up to L = 128 only
  (``PIN_MAX_L``: Pinocchio's constraint data of the L = 256 ladder exhaust 24 GiB).

Before timing, every loopdyn method's q̈ is checked against rcr's to 1e-9 (rcr itself
equals ``augmented`` to 1e-10 in ``tests/test_rcr.py``).  The log-log slope
of ``rcr`` and ``entry`` from L = 64 to 1024 is printed at the end.

``--plot PATH`` writes the paper's Fig. 11 from the medians: per-call cost against n
with no constraints (``ld.aba`` on the open tree), the traditional O(n) method
(``recursive_lambda``, the η + ζλ of eqs. 13–32) and RCR, with the other peers faint.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import loopdyn as ld
import timing
from loopdyn.kernels import tiers

tiers.set_policy("compiled")  # time the compiled tier (first calls compile)

OTHERS = ("augmented", "slm", "sslm", "recursive_lambda", "embedding")


def state(model, seed=0):
    """A consistent state of the ladder: q0, random independent rates completed."""
    rng = np.random.default_rng(seed)
    q = np.array(model.q0)
    v = ld.complete_velocity(model, q, rng.normal(size=model.nv) * 0.3)
    tau = rng.normal(size=model.nv)
    return q, v, tau


def pin_calls(model, q, v, tau):
    """{name: (call returning Pinocchio's q̈, export)} of Pinocchio's closed-loop solvers
    (``timing.pinocchio_call``)."""
    out = {}
    for name, prox in (("constraintDynamics", (1e-12, 1e-8, 20)), ("lcaba", (1e-12, 1e-4, 2000))):
        call, ex = timing.pinocchio_call(model, q, v, tau, name, prox)
        if call is not None:
            out["pin." + name] = (call, ex)
    return out


PIN_MAX_L = 128


def measure(L, rounds, min_time, max_call, skip):
    """(row of median µs, ratios rcr/x, errors) for spatial_ladder(L)."""
    model = ld.examples.spatial_ladder(L)
    tree = ld.examples.spatial_ladder_tree(L)
    assert tree.nv == model.nv and tree.m == 0
    q, v, tau = state(model)
    d = model.data
    res = ld.forward_dynamics(model, q, v, tau, method="rcr", data=d)
    assert res.method == "rcr"
    ref = res.qdd
    scale = max(1.0, np.abs(ref).max())
    errors = {}
    bound = d.bound["rcr"][0]
    qdd, lam = np.empty(model.nv), np.empty(model.m)
    fns = {
        "rcr": lambda: ld.forward_dynamics(model, q, v, tau, method="rcr", data=d),
        "entry": lambda: bound(q, v, tau, qdd, lam),
        "aba": lambda: ld.aba(tree, q, v, tau),
    }
    for m in OTHERS:
        if m in skip:
            continue
        t0 = time.process_time()
        r = ld.forward_dynamics(model, q, v, tau, method=m)
        if time.process_time() - t0 > max_call:  # first call: compiles, plans, detects
            t0 = time.process_time()
            r = ld.forward_dynamics(model, q, v, tau, method=m)
            if time.process_time() - t0 > max_call:
                skip.add(m)
                continue
        errors[m] = float(np.abs(r.qdd - ref).max() / scale)
        assert errors[m] < 1e-9, f"L={L}: {m} differs from rcr by {errors[m]:.2e}"
        fns[m] = lambda m=m: ld.forward_dynamics(model, q, v, tau, method=m)
    # Pinocchio's RigidConstraintData of the L = 256 ladder exhaust 24 GiB (MemoryError
    # from c.createData() under a 12 GiB limit): its peers stop at PIN_MAX_L
    peers = pin_calls(model, q, v, tau) if L <= PIN_MAX_L else {}
    for name, (call, ex) in peers.items():
        if name in skip:
            continue
        t0 = time.process_time()
        qp = ex.v_from(call())
        if time.process_time() - t0 > max_call:
            skip.add(name)
            continue
        errors[name] = float(np.abs(qp - ref).max() / scale)
        fns[name] = call
    t = timing.alternate(list(fns.values()), rounds, min_time)
    names = list(fns)
    med = {n: float(np.median(t[:, k])) for k, n in enumerate(names)}
    ratios = {n: timing.ratio(t, 0, k) for k, n in enumerate(names) if k}
    eratios = {n: timing.ratio(t, 1, k) for k, n in enumerate(names) if n == "aba"}
    return model, med, ratios, eratios, errors


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="fewer rounds, L up to 256")
    ap.add_argument("--rounds", type=int, default=None, help="alternation rounds (default 15)")
    ap.add_argument("--max-call", type=float, default=0.1, help="drop a method above (s)")
    ap.add_argument("--wall", action="store_true", help="time with the wall clock")
    ap.add_argument("--plot", type=Path, default=None, help="write Fig. 11 (a PNG) here")
    ap.add_argument("--max-L", type=int, default=1024, help="largest L")
    args = ap.parse_args(argv)
    if not args.wall:
        timing.use_cpu_time()
    rounds = args.rounds or (5 if args.quick else 15)
    min_time = 0.01 if args.quick else 0.03
    Ls = [8, 16, 32, 64, 128, 256] + ([] if args.quick else [512, 1024])
    Ls = [L for L in Ls if L <= args.max_L]
    print(f"timer: {'wall' if args.wall else 'process CPU'} time; {rounds} rounds alternated")
    print("per call: median µs; rcr / x: median [min–max] over the rounds\n")
    print(f"Pinocchio peers up to L = {PIN_MAX_L} (their constraint data of the L = 256 "
          "ladder exhaust 24 GiB); loopdyn methods dropped above --max-call\n")  # fmt: skip
    skip = set()
    series = []
    curves = {}
    for L in Ls:
        model, med, ratios, eratios, errors = measure(L, rounds, min_time, args.max_call, skip)
        print(f"L = {L} (n = {model.nv}, m = {model.m})")
        print(f"  rcr {med['rcr']:.1f} µs, entry {med['entry']:.1f} µs")
        for n, (r, lo, hi) in ratios.items():
            err = f", |Δq̈| {errors[n]:.1e}" if n in errors else ""
            print(f"  {n:<24}{med[n]:>12.1f} µs   rcr/x {r:7.3f} [{lo:.3f}–{hi:.3f}]{err}")
        r, lo, hi = eratios["aba"]
        print(f"  entry / aba {r:.3f} [{lo:.3f}–{hi:.3f}]")
        series.append((L, med["rcr"], med["entry"], med["aba"]))
        for name, t in med.items():
            curves.setdefault(name, []).append((model.nv, t))
    arr = np.array(series)
    sel = arr[:, 0] >= 64
    if sel.sum() >= 2:
        lx = np.log(arr[sel, 0])
        s = [np.polyfit(lx, np.log(arr[sel, k]), 1)[0] for k in (1, 2, 3)]
        print(f"\nlog-log slope over L = 64 … {int(arr[-1, 0])}: rcr {s[0]:.3f}, "
              f"entry {s[1]:.3f}, aba {s[2]:.3f}")  # fmt: skip
    if args.plot is not None:
        fig11(curves, args.plot)
        print(f"Fig. 11 written to {args.plot}")


def fig11(curves, path):
    """The paper's Fig. 11 from measured medians: µs per call against n."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    main = {"aba": "no constraints (ld.aba, open tree)",
            "recursive_lambda": "traditional O(n) (recursive_lambda)",
            "rcr": "RCR (ld.forward_dynamics, method='rcr')"}  # fmt: skip
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for name, pts in curves.items():
        if name == "entry":
            continue
        n, t = np.array(pts).T
        if name in main:
            ax.loglog(n, t, "o-", lw=2, label=main[name])
        else:
            ax.loglog(n, t, ".--", lw=1, alpha=0.5, label=name)
    ax.set_xlabel("generalized coordinates n (spatial_ladder, m = n − 2)")
    ax.set_ylabel("µs per forward-dynamics call (median)")
    ax.set_title("Fig. 11: cost of the spatial ladder, measured")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
