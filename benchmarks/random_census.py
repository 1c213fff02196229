"""Exact-or-error census of every forward-dynamics method on random closed-loop mechanisms.

Run from the repository root::

    python benchmarks/random_census.py --n 2000 --seed 11            # ~1 min per 2000
    python benchmarks/random_census.py --n 10000 --seed 11 --shrink  # + minimal reproducers
    python benchmarks/random_census.py --seed 11 --show 117          # the code of case 117
    python benchmarks/random_census.py --seed 11 --show 728 --shrink --methods sslm
    python benchmarks/random_census.py --family parallel --methods denoc --n 1000

Mechanism i of a run is ``tests/mechanisms.random_mechanism((seed, i))`` (random trees
of 3–25 bodies with every joint type, 1–5 satisfiable closures of every kind, ~20 %
deliberately redundant, ~30 % planar, masses over six decades); with ``--family
parallel`` it is ``tests/parallel_mechanisms.random_parallel_mechanism((seed, i))``
instead (parallel mechanisms of the DeNOC class: a base, a platform, 2–6 legs, planar
and spatial, every leg joint and cut joint kind, ~40 % near a singular leg pose).  Its
assembly guesses are drawn from ``default_rng((seed, i, 1))``.  Every case is
reproducible alone.

Each method's q̈ on a fresh ``model.create_data()`` is compared with the dense oracle
of ``tests/mechanisms.py`` (Gauss's principle from ``ld.crba``, ``ld.nonlinear_effects``
and ``ld.constraints``, SVD, extended-precision refinement).  Per method the table
counts:

- agrees: q̈ within 1e-8 of the oracle, relative to the problem's acceleration scale
  max(|q̈|∞, |M⁻¹(τ - h)|∞, |v|∞², |g|);
- at rank: where the oracle's rank tolerance calls the state ambiguous and drops a row
  the method keeps (a closure row 1e-10 of the others), q̈ solving the equations with
  that row exactly (``mechanisms.EXACT_AT_ITS_RANK``);
- named: ``SingularityError`` where the oracle is not well-conditioned (condition of
  J M⁻¹ Jᵀ on its range >= 1e8, an unclean rank gap, or J q̈ = γ without solution:
  a singular configuration);
- silent: q̈ returned and off by more than 1e-8, or returned where J q̈ = γ has no
  solution (split: well / not well-conditioned);
- sing/well: ``SingularityError`` although the oracle is well-conditioned;
- outside: a ``ModelError`` of a method for a class of mechanisms (denoc) naming why the
  model is not in it (for the general family nearly every mechanism; for the parallel
  family the weld closures, which DeNOC refuses);
- other: any other exception;
- fallback: answers (counted in the columns above) that came from another method than
  the one asked for (``res.method``: DeNOC falls back to the augmented solve where its
  own projections are ill-conditioned);
- max err: the largest relative error among the answers that agree;
- cached: the model's cached workspace (after a call at another state) and a fresh
  one give different outcomes or answers differing by more than 1e-8.

Assembly: from two guesses with every coordinate moved by up to 0.1 (rad or m,
quaternions on the manifold) and one holding part of the independent coordinates at
q*, ``ld.assemble`` must return a configuration with max |Φ| <= 1e-9.
"""

import argparse
import collections
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import loopdyn as ld
import mechanisms as mx
import parallel_mechanisms as pm
from loopdyn.kernels import tiers

tiers.set_policy("compiled")  # time the compiled tier (first calls compile)

KINDS = (
    mx.AGREES, mx.EXACT_AT_ITS_RANK, mx.NAMED, mx.SILENT, mx.SINGULAR_WELL, mx.OUTSIDE, mx.OTHER,
)  # fmt: skip


def generator(family, max_bodies):
    """The mechanism of a seed: ``f((seed, i))`` for the family."""
    if family == "parallel":
        return pm.random_parallel_mechanism
    return lambda s: mx.random_mechanism(s, max_bodies=max_bodies)


def run(n, seed, max_bodies, assembly, methods, progress=True, family="general"):
    """Census records (see ``mechanisms.census``), with a progress line every 500."""
    t0 = time.perf_counter()

    def report(i):
        if progress and (i + 1) % 500 == 0:
            el = time.perf_counter() - t0
            print(f"  {i + 1}/{n} mechanisms, {el:.0f} s", file=sys.stderr, flush=True)

    return mx.census(
        n, seed, max_bodies=max_bodies, assembly=assembly, methods=methods, progress=report,
        generator=generator(family, max_bodies) if family != "general" else None,
    )  # fmt: skip


def table(results, methods):
    """Print the per-method table and return the failures by (method, class)."""
    fails = collections.defaultdict(list)
    print(
        f"{'method':18s} {'agrees':>7s} {'at rank':>7s} {'named':>6s} {'silent':>7s} "
        f"{'(well)':>7s} {'sing/well':>9s} {'outside':>7s} {'other':>6s} {'cached':>7s} "
        f"{'max err':>9s} {'fallback':>8s}"
    )
    for m in methods:
        cnt = collections.Counter()
        maxerr = 0.0
        for i, summary, rec, *_ in results:
            o = rec["outcomes"][m]
            cnt[o.kind] += 1
            if o.method and o.method != m:
                cnt["fallback"] += 1
            if np.isfinite(o.error) and rec["oracle"].consistent and o.kind == mx.AGREES:
                maxerr = max(maxerr, o.error)
            well = rec["oracle"].well
            if o.kind == mx.SILENT and well:
                cnt["silent_well"] += 1
            if rec["cached"][m]:
                cnt["cached"] += 1
                fails[(m, "cached")].append((i, summary, rec["cached"][m], rec))
            if not o.ok:
                key = o.kind + (" (well-conditioned)" if o.kind == mx.SILENT and well else "")
                key += f" [{rec['tag']}]"
                fails[(m, key)].append((i, summary, f"{o.error:.3g} {o.message[:160]}", rec))
        print(
            f"{m:18s} {cnt[mx.AGREES]:7d} {cnt[mx.EXACT_AT_ITS_RANK]:7d} {cnt[mx.NAMED]:6d} "
            f"{cnt[mx.SILENT]:7d} "
            f"{cnt['silent_well']:7d} {cnt[mx.SINGULAR_WELL]:9d} {cnt[mx.OUTSIDE]:7d} "
            f"{cnt[mx.OTHER]:6d} {cnt['cached']:7d} {maxerr:9.2e} {cnt['fallback']:8d}"
        )
    return fails


def shrink_and_print(mech, method, target, target_tag, what):
    """Shrink ``mech`` while ``method`` keeps failing the same way; print its code."""

    def still(x):
        o = mx.dense_oracle(x.model, x.q, x.v, x.tau)
        out = mx.judge(x, method, o, data=x.model.create_data())
        return out.kind == target and mx.tag(x, o) == target_tag

    small = mx.shrink(mech, still)
    o = mx.dense_oracle(small.model, small.q, small.v, small.tau)
    out = mx.judge(small, method, o, data=small.model.create_data())
    print(f"\n# {method} — {what}, shrunk to {small.summary}")
    print(
        f"# oracle rank {o.rank} cond {o.cond:.3g} gap {o.gap:.1e}; {out.kind} "
        f"err {out.error:.3g} {out.message[:200]}"
    )
    print(small.code())


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2000, help="number of mechanisms")
    p.add_argument("--seed", type=int, default=11, help="census seed (recorded)")
    p.add_argument("--max-bodies", type=int, default=25)
    p.add_argument("--no-assembly", action="store_true", help="skip the assembly checks")
    p.add_argument("--methods", default=",".join(mx.METHODS))
    p.add_argument("--list", type=int, default=5, help="failures listed per class")
    p.add_argument("--shrink", action="store_true", help="print a minimal reproducer per class")
    p.add_argument("--show", type=int, default=None, help="print the code of case SHOW")
    p.add_argument(
        "--family",
        choices=("general", "parallel"),
        default="general",
        help="general random closed-loop mechanisms (tests/mechanisms.py) or parallel "
        "mechanisms of the DeNOC class (tests/parallel_mechanisms.py)",
    )
    a = p.parse_args(argv)
    methods = tuple(a.methods.split(","))
    make = generator(a.family, a.max_bodies)
    if a.show is not None:
        mech = make((a.seed, a.show))
        if a.shrink:
            o = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
            for m in methods:
                out = mx.judge(mech, m, o, data=mech.model.create_data())
                if not out.ok:
                    shrink_and_print(mech, m, out.kind, mx.tag(mech, o), f"case {a.show}")
            return 0
        print(f"# case {a.show} of seed {a.seed}: {mech.summary}")
        print(mech.code())
        return 0
    print(
        f"random census ({a.family} mechanisms): N = {a.n}, seed = {a.seed}, "
        f"max bodies = {a.max_bodies}; "
        f"loopdyn {ld.__version__}, numpy {np.__version__}, python {platform.python_version()}"
    )
    t0 = time.perf_counter()
    results = run(a.n, a.seed, a.max_bodies, not a.no_assembly, methods, family=a.family)
    wall = time.perf_counter() - t0
    orc = [r[2]["oracle"] for r in results]
    well = sum(o.well for o in orc)
    red = collections.Counter(r[3] for r in results if r[3])
    planar = sum(r[1].startswith("planar") for r in results)
    noise = np.array([o.noise for o in orc])
    print(
        f"{a.n} mechanisms in {wall:.1f} s: {planar} planar, redundant {dict(red)}, "
        f"{well} well-conditioned (cond J M⁻¹ Jᵀ < {mx.COND_WELL:.0e}), "
        f"rank-0 {sum(o.rank == 0 for o in orc)}, "
        f"inconsistent (singular) {sum(not o.consistent for o in orc)}, "
        f"max cond(M) {max(o.cond_M for o in orc):.2g}, "
        f"oracle data noise median {np.median(noise):.1e} max {noise.max():.1e}"
    )
    vnotes = [r for r in results if r[4]]
    if vnotes:
        print(f"ld.complete_velocity failed on {len(vnotes)} (the generator projected v itself)")
    print()
    fails = table(results, methods)
    if not a.no_assembly:
        asm = [(i, s, rec["assembly"]) for i, s, rec, *_ in results if rec["assembly"]]
        nguess = sum(len(x[2]) for x in asm)
        print(f"\nassembly: {len(asm)} of {a.n} mechanisms fail from {nguess} guesses within 0.1")
        took = [t for _, _, rec, *_ in results for t in rec.get("assembly_s", ())]
        if took:
            print(
                f"assembly time per guess: median {np.median(took) * 1e3:.1f} ms, "
                f"max {max(took):.2f} s (a failure above {mx.ASSEMBLY_MAX_S:.0f} s)"
            )
        for i, s, msgs in asm[: a.list]:
            print(f"  case {i}: {s}\n      {msgs[0][:200]}")
    for (m, kind), cases in sorted(fails.items()):
        print(f"\n{m} — {kind}: {len(cases)}")
        for i, s, msg, rec in cases[: a.list]:
            o = rec["oracle"]
            print(
                f"  case {i}: {s} | rank {o.rank} cond {o.cond:.3g} gap {o.gap:.1e} "
                f"cond(M) {o.cond_M:.2g} | {msg}"
            )
    if a.shrink:
        print("\nminimal reproducers (greedy shrink over closures and leaf bodies)")
        for (m, kind), cases in sorted(fails.items()):
            if kind == "cached":
                continue
            i, _, _, rec = min(cases, key=lambda c: (int(c[1].split("nb=")[1].split()[0]), c[0]))
            mech = make((a.seed, i))
            target, target_tag = rec["outcomes"][m].kind, rec["tag"]
            shrink_and_print(mech, m, target, target_tag, f"{kind}: case {i} of seed {a.seed}")
    bad = sum(len(c) for c in fails.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
