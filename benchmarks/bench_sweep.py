"""A 1000-case sweep of 5 s four-bar simulations on a Dask LocalCluster (issue 16, item 3).

    PYTHONPATH=src python benchmarks/bench_sweep.py [--cases 1000] [--rounds 3] [--workers 2]

The grid: crank angle θ1 (30°..90°) × constant crank torque τ (-5..5 N m), 5 s from
rest, ``run="simulate"`` (RK45 in the compiled loop, rtol = atol = 1e-8, projection,
501 outputs).  In one process, alternated per round (a change of load hits all three):

* serial: a plain Python loop calling the same run (``loopdyn.sweeps.run_simulate``) on
  the same models (one per θ1, as the sweep's tasks build them), no Dask, no store;
* in-process: ``ld.sweep(..., n_workers=0, store=...)`` (chunking, result table, Parquet
  parts), no Dask;
* cluster: ``ld.sweep(..., client=...)`` on a LocalCluster of ``--workers`` processes
  (one thread each) started once before the rounds (its start and warm-up are timed
  separately), storing the parts.

Reported: wall times (median over the rounds, min-max), cases/s, the speed-up of the
cluster over the serial loop, and the per-case overhead: in-process (sweep - serial) / N;
cluster, ``workers`` × wall / N - (the cases' own run time, ``wall_time``, summed) / N:
the worker time per case spent outside the simulation (scheduling, transfer, storing,
idle workers).  On a machine shared with other jobs the wall times mostly measure the
load; the CPU times (this process's plus the workers', ``time.process_time``) do not:
the CPU overhead per case is (sweep CPU - serial loop CPU) / N.
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import loopdyn as ld
from loopdyn.kernels import tiers
from loopdyn.sweeps import case_table, run_simulate

tiers.set_policy("compiled")  # time the compiled tier (first calls compile)

OPTIONS = dict(t_end=5.0, integrator="RK45")


def grid(n):
    n1 = max(d for d in range(1, int(np.sqrt(n)) + 1) if n % d == 0)  # 1000: 25 × 40
    n2 = n // n1
    return {"theta1": np.deg2rad(np.linspace(30, 90, n1)), "tau": np.linspace(-5, 5, n2)}


def serial(params):
    table = case_table(params)
    models, out = {}, []
    for case in table.to_dict("records"):
        th = case["theta1"]
        if th not in models:
            models[th] = ld.examples.four_bar(theta1=th)
        out.append(run_simulate(models[th], case, **OPTIONS))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    from distributed import Client, LocalCluster

    params = grid(a.cases)
    n = len(case_table(params))
    print(f"{n} cases: four_bar, {len(params['theta1'])} θ1 × {len(params['tau'])} τ, 5 s each")
    serial(grid(4))  # compile / load the kernels here
    t0 = time.perf_counter()
    cluster = LocalCluster(
        n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    client = Client(cluster)
    t_start = time.perf_counter() - t0
    t0 = time.perf_counter()
    ld.sweep("four_bar", grid(4), client=client, progress=False, **OPTIONS)  # warm workers
    t_warm = time.perf_counter() - t0
    rows = {"serial": [], "in-process": [], "cluster": []}
    cpu = {"serial": [], "in-process": [], "cluster": []}
    own = {"in-process": [], "cluster": []}

    def cpu_now():  # this process's CPU time and the workers' (s)
        return time.process_time() + sum(client.run(time.process_time).values())

    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            t0, c0 = time.perf_counter(), time.process_time()
            ref = serial(params)
            rows["serial"].append(time.perf_counter() - t0)
            cpu["serial"].append(time.process_time() - c0)
            for name, kw in (("in-process", {"n_workers": 0}), ("cluster", {"client": client})):
                c0 = cpu_now()
                t0 = time.perf_counter()
                df = ld.sweep("four_bar", params, store=Path(tmp) / f"{name}{r}.parquet",
                              progress=False, **kw, **OPTIONS)  # fmt: skip
                rows[name].append(time.perf_counter() - t0)
                cpu[name].append(cpu_now() - c0)
                own[name].append(float(df["wall_time"].sum()))
                assert df["error"].isna().all() and len(df) == n
                drift = np.array([x["energy_drift"] for x in ref])
                np.testing.assert_allclose(df["energy_drift"], drift, rtol=1e-9, atol=1e-15)
            print(f"round {r}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in rows.items()))
    client.close()
    cluster.close()

    def med(x):
        return f"{statistics.median(x):.2f} s ({min(x):.2f}–{max(x):.2f})"

    ts, ti, tc = (np.array(rows[k]) for k in ("serial", "in-process", "cluster"))
    print(f"\nLocalCluster of {a.workers} workers: start {t_start:.2f} s, first sweep (warm-up) "
          f"{t_warm:.2f} s")  # fmt: skip
    print("| run | wall time | cases/s |\n| --- | --- | --- |")
    for k, t in (("serial loop", ts), ("ld.sweep in-process", ti), ("ld.sweep cluster", tc)):
        print(f"| {k} | {med(list(t))} | {n / np.median(t):.0f} |")
    print(f"per-case run time (serial loop): {np.median(ts) / n * 1e3:.2f} ms")
    print(f"speed-up cluster / serial: {np.median(ts / tc):.2f}× ({(ts / tc).min():.2f}–"
          f"{(ts / tc).max():.2f})")  # fmt: skip
    ov_in = (ti - ts) / n * 1e3
    ov_cl = (a.workers * tc - np.array(own["cluster"])) / n * 1e3
    print(f"per-case overhead in-process (sweep - serial): {np.median(ov_in):.3f} ms "
          f"({ov_in.min():.3f}–{ov_in.max():.3f})")  # fmt: skip
    print(f"per-case overhead on the cluster (worker time outside the run): "
          f"{np.median(ov_cl):.3f} ms ({ov_cl.min():.3f}–{ov_cl.max():.3f})")  # fmt: skip
    # CPU time (this process + the workers): not inflated by other jobs on the machine
    cs, ci, cc = (np.array(cpu[k]) for k in ("serial", "in-process", "cluster"))
    print(f"CPU time per case: serial loop {np.median(cs) / n * 1e3:.2f} ms, in-process "
          f"{np.median(ci) / n * 1e3:.2f} ms, cluster (client + workers) "
          f"{np.median(cc) / n * 1e3:.2f} ms")  # fmt: skip
    for k, c in (("in-process", ci), ("cluster", cc)):
        d = (c - cs) / n * 1e3
        print(f"per-case CPU overhead {k} (sweep - serial loop): {np.median(d):.3f} ms "
              f"({d.min():.3f}–{d.max():.3f})")  # fmt: skip


if __name__ == "__main__":
    main()
