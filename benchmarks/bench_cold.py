"""What a new user waits for: the first run on an empty numba cache, and again warm.

Run from the repository root::

    python benchmarks/bench_cold.py                  # every row, cold and warm (~5-10 min)
    python benchmarks/bench_cold.py --quick          # first call, info, models only
    python benchmarks/bench_cold.py --rows first,simulate --warm-only
    python benchmarks/bench_cold.py --ladder 128,256,512,1024 --rows ladder --warm-only
    python benchmarks/bench_cold.py --against /path/to/old/src   # alternate with a release

Each number is the wall time of a **fresh Python process** (``subprocess``) with
``NUMBA_CACHE_DIR`` set to a new empty folder (*cold*) or to the folder a previous
process of the same row filled (*warm*); the process runs with ``PYTHONPATH`` set to
the ``src`` folder measured.  Rows:

- ``first``: in one process, ``import loopdyn``, ``ld.examples.four_bar()``, the first
  ``ld.forward_dynamics(model, q0, 0, 0)`` (each timed inside the process, plus the
  process's whole wall time, interpreter start included);
- ``simulate``: ``loopdyn simulate four_bar --t-end 5`` (``python -m loopdyn``), the
  process's wall time, and the tier it reports;
- ``info``: ``loopdyn info stewart``; ``models``: ``loopdyn models``;
- ``ladder``: ``ld.examples.spatial_ladder(L)`` build time in a process (``--ladder``
  sizes), import excluded;
- ``cli``: warm only, each command of ``CLI`` (``loopdyn models``, ``info four_bar``,
  ``info stewart``, ``simulate four_bar --t-end 5``, ``convert four_bar x.toml``,
  ``bench four_bar -m augmented --seconds 0.01``) as a user runs it (``python -m
  loopdyn``), ``--cli-runs`` times, the commands (and sources) alternated; the process's
  wall time and its CPU time (user + system: what the command costs on an idle
  machine, where the wall time approaches it; on a busy one the wall time also holds
  the waits for a core).  The cache is filled first by one run of each command under
  ``LOOPDYN_TIER=compiled`` (minutes on an empty cache; ``--cache DIR`` reuses a
  folder, which the two sources of ``--against`` can share: numba keeps each source
  folder's files apart).

    python benchmarks/bench_cold.py --rows cli --cli-runs 5 --cache ~/.cache/ld-bench

With ``--against OLD_SRC`` every row is also measured with that source tree, alternated
(new, old, new, old ...) so that a change in the machine's load affects both; each
row's cold runs use their own empty cache folders.  ``--repeat N`` repeats each
measurement (median and min-max are printed).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# the code a `first` process runs: prints one JSON line of its timings
_FIRST = r"""
import json, time
t0 = time.perf_counter()
import numpy as np
import loopdyn as ld
t1 = time.perf_counter()
m = ld.examples.four_bar()
t2 = time.perf_counter()
r = ld.forward_dynamics(m, m.q0, np.zeros(m.nv), np.zeros(m.nv))
t3 = time.perf_counter()
try:
    from loopdyn.kernels import tiers
    tier = "+".join(tiers.used())
except ImportError:  # a release without tiers: compiled
    tier = "compiled"
print("@@" + json.dumps(dict(import_s=t1 - t0, build_s=t2 - t1, call_s=t3 - t2, tier=tier)))
"""

_LADDER = r"""
import json, sys, time
import loopdyn as ld
t0 = time.perf_counter()
m = ld.examples.spatial_ladder(int(sys.argv[1]))
t1 = time.perf_counter()
print("@@" + json.dumps(dict(build_s=t1 - t0, nq=m.nq)))
"""


def _run(src, cache, argv, timeout):
    """(wall seconds, stdout, rc) of ``python argv`` with PYTHONPATH=src and the cache."""
    env = dict(os.environ, PYTHONPATH=str(src), NUMBA_CACHE_DIR=str(cache))
    env.pop("LOOPDYN_TIER", None)
    # as a user's Python: byte-code written and read (__pycache__); a fresh clone's first
    # run compiles the sources once (~0.4 s), every later one reads them
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    t0 = time.perf_counter()
    try:
        p = subprocess.run(
            [sys.executable, *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=tempfile.gettempdir(),
        )
    except subprocess.TimeoutExpired:
        return float("nan"), "", "timeout"
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-2000:])
    return wall, p.stdout + p.stderr, p.returncode


# the warm command lines of the ``cli`` row: (label, arguments of ``python -m loopdyn``)
CLI = (
    ("loopdyn models", ["models"]),
    ("loopdyn info four_bar", ["info", "four_bar"]),
    ("loopdyn info stewart", ["info", "stewart"]),
    ("loopdyn simulate four_bar --t-end 5", ["simulate", "four_bar", "--t-end", "5", "-q"]),
    ("loopdyn convert four_bar x.toml", ["convert", "four_bar", "{tmp}/x.toml"]),
    (
        "loopdyn bench four_bar -m augmented --seconds 0.01",
        ["bench", "four_bar", "-m", "augmented", "--seconds", "0.01"],
    ),
)


def _run_cli(src, cache, argv, timeout, tier=None):
    """(wall s, CPU s of the process (user + system), rc) of ``python -m loopdyn argv``."""
    env = dict(os.environ, PYTHONPATH=str(src), NUMBA_CACHE_DIR=str(cache))
    env.pop("LOOPDYN_TIER", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if tier is not None:
        env["LOOPDYN_TIER"] = tier
    with tempfile.TemporaryDirectory() as tmp:
        argv = [x.replace("{tmp}", tmp) for x in argv]
        r0, t0 = os.times(), time.perf_counter()
        try:
            p = subprocess.run(
                [sys.executable, "-m", "loopdyn", *argv],
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd=tmp,
            )
        except subprocess.TimeoutExpired:
            return float("nan"), float("nan"), "timeout"
        wall, r1 = time.perf_counter() - t0, os.times()
    cpu = r1.children_user - r0.children_user + r1.children_system - r0.children_system
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-2000:])
    return wall, cpu, p.returncode


def measure_cli(srcs, caches, runs, timeout, results):
    """The ``cli`` row: fill each source's cache (one run of each command under the
    ``compiled`` tier), then ``runs`` warm runs of each command, alternated."""
    for name, src in srcs.items():
        for _label, argv in CLI:
            _run_cli(src, caches[name], argv, timeout, tier="compiled")
        print(f"# cli {name}: cache filled", file=sys.stderr, flush=True)
    for _ in range(runs):
        for label, argv in CLI:
            for name, src in srcs.items():
                wall, cpu, rc = _run_cli(src, caches[name], argv, timeout)
                ok = rc == 0
                results.setdefault((name, "warm", label), []).append(wall if ok else f"rc={rc}")
                results.setdefault((name, "warm", f"{label} (CPU)"), []).append(
                    cpu if ok else f"rc={rc}"
                )


def _payload(out):
    for line in out.splitlines():
        if line.startswith("@@"):
            return json.loads(line[2:])
    return {}


def _tier_of(out):
    for line in out.splitlines():
        if "tier" in line.lower():
            return line.strip()[:60]
    return ""


def measure(row, src, cache, ladder, timeout):
    """{label: seconds or text} of one row in one fresh process."""
    if row == "first":
        wall, out, rc = _run(src, cache, ["-c", _FIRST], timeout)
        p = _payload(out)
        return {
            "import": p.get("import_s"),
            "build four_bar": p.get("build_s"),
            "first forward_dynamics": p.get("call_s"),
            "process (first call)": wall,
            "tier (first call)": p.get("tier", f"rc={rc}"),
        }
    if row == "simulate":
        wall, out, rc = _run(
            src,
            cache,
            ["-m", "loopdyn", "simulate", "four_bar", "--t-end", "5", "--quiet"],
            timeout,
        )
        return {"loopdyn simulate four_bar --t-end 5": wall, "tier (simulate)": _tier_of(out)}
    if row == "info":
        wall, out, rc = _run(src, cache, ["-m", "loopdyn", "info", "stewart"], timeout)
        return {"loopdyn info stewart": wall if rc == 0 else f"rc={rc}"}
    if row == "models":
        wall, out, rc = _run(src, cache, ["-m", "loopdyn", "models"], timeout)
        return {"loopdyn models": wall if rc == 0 else f"rc={rc}"}
    if row == "ladder":
        res = {}
        for L in ladder:
            wall, out, rc = _run(src, cache, ["-c", _LADDER, str(L)], timeout)
            p = _payload(out)
            res[f"spatial_ladder({L}) build"] = p.get("build_s", f"rc={rc}")
        return res
    raise ValueError(row)


def _wait_build(src, cache):
    """Seconds until the background build of a cold run has finished (none: 0)."""
    if not (Path(src) / "loopdyn" / "kernels" / "background.py").exists():
        return "-"
    t0 = time.perf_counter()
    time.sleep(3.0)  # the build process takes its lock after importing loopdyn
    _run(src, cache, ["-m", "loopdyn.kernels.background", "wait"], 3600)
    return time.perf_counter() - t0 - 3.0 if list(Path(cache).glob("loopdyn-build-*")) else 0.0


def _fmt(xs):
    nums = [x for x in xs if isinstance(x, float)]
    if not nums:
        return str(xs[0]) if xs else "-"
    nums.sort()
    med = nums[len(nums) // 2]
    if len(nums) == 1:
        return f"{med:.2f}"
    return f"{med:.2f} ({nums[0]:.2f}-{nums[-1]:.2f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="first,simulate,info,models,ladder,cli")
    ap.add_argument("--quick", action="store_true", help="rows first, info, models")
    ap.add_argument("--cold-only", action="store_true")
    ap.add_argument("--warm-only", action="store_true", help="fill a cache, then time warm")
    ap.add_argument("--ladder", default="128,256,512", help="spatial_ladder sizes")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="the src folder measured")
    ap.add_argument("--against", type=Path, default=None, help="another src folder")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--cli-runs", type=int, default=5, help="warm runs per command (cli)")
    ap.add_argument("--cache", type=Path, default=None, help="the cli row's cache (kept)")
    ap.add_argument("--against-cache", type=Path, default=None, help="idem, --against's")
    a = ap.parse_args()
    rows = ["first", "info", "models"] if a.quick else a.rows.split(",")
    ladder = [int(x) for x in a.ladder.split(",") if x]
    srcs = {"this": a.src.resolve()}
    if a.against is not None:
        srcs["against"] = a.against.resolve()
    results = {}  # (src, kind, label) -> [values]
    root = Path(tempfile.mkdtemp(prefix="loopdyn_cold_"))
    try:
        if "cli" in rows and not a.cold_only:
            given = {"this": a.cache, "against": a.against_cache or a.cache}
            caches = {n: given[n] or root / f"{n}-cli" for n in srcs}
            for c in caches.values():
                Path(c).mkdir(parents=True, exist_ok=True)
            measure_cli(srcs, caches, a.cli_runs, a.timeout, results)
            rows = [r for r in rows if r != "cli"]
        for rep in range(a.repeat):
            for row in rows:
                for name, src in srcs.items():  # alternated per row
                    cache = root / f"{name}-{row}-{rep}"
                    cache.mkdir()
                    cold = measure(row, src, cache, ladder, a.timeout)  # fills the cache
                    # the background build a cold run started (loopdyn.kernels.tiers)
                    cold["background build after it"] = _wait_build(src, cache)
                    if not a.warm_only:
                        for k, v in cold.items():
                            results.setdefault((name, "cold", k), []).append(v)
                    if not a.cold_only:
                        for k, v in measure(row, src, cache, ladder, a.timeout).items():
                            results.setdefault((name, "warm", k), []).append(v)
                    print(f"# {row} {name} rep {rep} done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    labels = list(dict.fromkeys(k for _, _, k in results))
    kinds = [k for k in ("cold", "warm") if any(r[1] == k for r in results)]
    cols = [(n, k) for n in srcs for k in kinds]
    head = ["measurement (s, fresh process)"] + [f"{k} ({n})" for n, k in cols]
    table = [head]
    for lab in labels:
        table.append([lab] + [_fmt(results.get((n, k, lab), [])) for n, k in cols])
    widths = [max(len(r[c]) for r in table) for c in range(len(head))]
    for i, r in enumerate(table):
        print("  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)))
        if i == 0:
            print("  ".join("-" * w for w in widths))


if __name__ == "__main__":
    main()
