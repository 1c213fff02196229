"""``loopdyn compile``: run as users run it, on an empty numba cache, then the cache holds
the kernels (``Entry.is_cached`` in a new process)."""

import os
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")

_CHECK = """
from loopdyn.methods import augmented, slm
from loopdyn.kinematics import closures
print("@@", augmented.ENTRY.is_cached(), closures.CONSTRAINTS.is_cached(),
      slm.ENTRY.is_cached())
"""


def _env(cache):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), COLUMNS="200")
    env["PYTHONPATH"] = os.pathsep.join([SRC, *filter(None, [env.get("PYTHONPATH")])])
    env.pop("LOOPDYN_TIER", None)
    return env


def _cached(cache):
    p = subprocess.run(
        [sys.executable, "-c", _CHECK], env=_env(cache), capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr
    line = next(x for x in p.stdout.splitlines() if x.startswith("@@"))
    return [w == "True" for w in line.split()[1:]]


def test_compile_one_method_fills_the_cache_with_its_kernels_only(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    assert _cached(cache) == [False, False, False]  # an empty cache
    p = subprocess.run(
        [sys.executable, "-m", "loopdyn", "compile", "four_bar", "-m", "augmented",
         "--no-simulate", "--jobs", "1"],
        env=_env(cache), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    assert "compiled 1 of 1 jobs" in p.stdout, p.stdout
    # augmented's entry and the closure kernels the four-bar's build (assembly) calls;
    # slm was not asked for
    assert _cached(cache) == [True, True, False]


def test_compile_reports_an_unknown_method_as_a_usage_error(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "loopdyn", "compile", "four_bar", "-m", "nope"],
        env=_env(tmp_path), capture_output=True, text=True,
    )  # fmt: skip
    assert p.returncode == 2 and "unknown method 'nope'" in p.stderr, p.stderr


def test_compile_names_an_unknown_model_in_one_line_before_any_worker(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "loopdyn", "compile", "no_such_model"],
        env=_env(tmp_path), capture_output=True, text=True,
    )  # fmt: skip
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "'no_such_model' is neither a catalog model nor a model file" in p.stderr


def test_all_entries_lists_every_kernel_entry():
    from loopdyn.cli_compile import all_entries, jobs_for

    names = all_entries()
    assert "loopdyn.methods.augmented:ENTRY" in names and "loopdyn.kinematics.frames:FK" in names
    assert len(names) == len(set(names)) >= 20
    jobs = jobs_for(None, [], True, True)
    assert jobs[-1] == "workload" and len(jobs) == len(names) + 1
    assert jobs_for("stewart", ["rcr"], True, False) == ["method:rcr:stewart", "simulate:stewart"]
