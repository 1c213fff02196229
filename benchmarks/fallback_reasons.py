"""Why rcr, sslm and embedding hand a state to ``augmented``: per fallback, the status of
each attempt of the method's own kernel, where it refused and the topology.

    python benchmarks/fallback_reasons.py --n 300 --seed 11
    python benchmarks/fallback_reasons.py --family parallel --n 300 --seed 11
    python benchmarks/fallback_reasons.py --catalog        # delta, legs, Cassie

Each case is ``random_census``'s mechanism i (same generators, same states); the
method runs through ``ld.forward_dynamics`` on fresh data with its binders wrapped, so
the status of every attempt is recorded (``methods.common``: -1 SINGULAR, -5
INACCURATE, ...), with ``d.diag`` (quality, residual, scale, refined steps, EOM
residual) and, for rcr, the loop block that failed.
"""

import argparse
import collections
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import loopdyn as ld
import mechanisms as mx
import parallel_mechanisms as pm
from loopdyn.methods import dynamics as D
from loopdyn.methods import rcr

STATUS = {-1.0: "SINGULAR", -2.0: "NONFINITE", -5.0: "INACCURATE"}
METHODS = ("sslm", "rcr", "embedding")


def wrap(log):
    """Wrap the binders of METHODS so that every call's status lands in ``log``."""
    orig = {m: D.BINDERS[m] for m in METHODS}

    def make(m):
        def binder(model, d, *a, **k):
            call = orig[m](model, d, *a, **k)

            def wrapped(q, v, tau, qdd, lam):
                st = call(q, v, tau, qdd, lam)
                rec = {"st": float(st), "diag": np.array(d.diag[:5]), "nrows": int(d.nrows)}
                if m == "rcr" and st < 0:
                    plan = rcr.plan_for(model, d)
                    b = int(plan.ip[rcr.R_FAIL])
                    if b >= 0:
                        bt = plan.table[b]
                        rec["block"] = (len(plan.blocks[b][1]), int(bt[rcr.B_M]),
                                        int(bt[rcr.B_NU]), float(plan.fw[bt[rcr.B_T]]))  # fmt: skip
                log.append((m, rec))
                return st

            wrapped.args = call.args
            return wrapped

        return binder

    for m in METHODS:
        D.BINDERS[m] = make(m)


def topo_summary(model):
    """A few words on the loop topology."""
    from loopdyn.topology.aggregation import structure

    cuts, groups, _ = structure(model)
    free = any(t in ("free", "floating") for t in model.joint_types) if hasattr(
        model, "joint_types") else False  # fmt: skip
    big = max((len(ix) for _, _, ix in groups), default=0)
    return (f"nb={model.nbodies} m={model.m} loops={len(cuts)} groups={len(groups)} "
            f"maxloops/group={big}" + (" floating" if free else ""))  # fmt: skip


def classify(model, q, v, tau, method, log):
    """(fell back?, reason string) of one call."""
    log.clear()
    try:
        res = ld.forward_dynamics(model, q, v, tau, method=method, data=model.create_data())
    except ld.LoopdynError as e:
        return True, f"raised {type(e).__name__}: {str(e)[:100]}"
    if res.method == method:
        return False, ""
    parts = []
    for m, rec in log:
        if m != method:
            continue
        s = STATUS.get(rec["st"], f"{rec['st']:.3g}")
        dg = rec["diag"]
        extra = f" block(ncl,m,nu,ratio)={rec['block']}" if "block" in rec else ""
        parts.append(f"{s}[q={dg[0]:.2g} res={dg[1]:.2g} eom={dg[4]:.2g} r={rec['nrows']}]"
                     + extra)  # fmt: skip
    return True, " | ".join(parts)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--max-bodies", type=int, default=25)
    p.add_argument("--family", choices=("general", "parallel"), default="general")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--well", action="store_true", help="only well-conditioned states")
    a = p.parse_args(argv)
    methods = a.methods.split(",")
    log = []
    wrap(log)
    warnings.simplefilter("ignore")
    count = collections.Counter()
    kinds = collections.Counter()
    for i in range(a.start, a.start + a.n):
        if a.family == "parallel":
            mech = pm.random_parallel_mechanism((a.seed, i))
        else:
            mech = mx.random_mechanism((a.seed, i), max_bodies=a.max_bodies)
        well = None
        if a.well:
            well = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau).well
            if not well:
                continue
        for m in methods:
            fb, why = classify(mech.model, mech.q, mech.v, mech.tau, m, log)
            if fb:
                count[m] += 1
                kinds[(m, why.split("[")[0].split(" ")[0])] += 1
                print(f"{i:5d} {m:9s} {mech.summary} | {topo_summary(mech.model)} | "
                      f"red={mech.redundancy} | {why}", flush=True)  # fmt: skip
    print("fallbacks:", dict(count))
    print("by first status:", dict(kinds))


if __name__ == "__main__":
    main()
