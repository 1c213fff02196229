"""``loopdyn compile [--all] [MODEL]``: build the compiled tier now, in the foreground.

    loopdyn compile                      # the README's workload (four-bar, its simulation)
    loopdyn compile stewart              # every method's kernels on the Stewart platform + simulate
    loopdyn compile four_bar -m augmented --no-simulate
    loopdyn compile --all                # every kernel entry of the package

The work is split into jobs (one per method of MODEL, one for its compiled simulation
loop; with ``--all`` one per ``Entry`` of the package and the README's workload), run by
``--jobs`` worker processes (``python -m loopdyn.cli_compile JOB ...``, each under the
``compiled`` tier policy, each a share of the jobs in turn, so kernels one job compiled
are in process for the next), a rich progress bar over the jobs.  Compiled code goes to
numba's disk cache (``NUMBA_CACHE_DIR``), where the next process finds it
(``Entry.is_cached``).  A method that does not apply to MODEL (a loopdyn error from its
first call) is skipped and said so; any other failure is one line on stderr, and the
exit status is 1.

Registered on the main command line by ``register(app)`` (one line in ``cli.py``).
"""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from queue import Queue
from typing import Annotated

import typer

from loopdyn.cli_common import _console, _esc

# the subpackages whose modules define kernel entries (``--all``)
_ENTRY_PACKAGES = ("kinematics", "tree", "methods", "analysis", "derivatives", "sim")


def register(app):
    """Add the ``compile`` command to the typer ``app``."""
    app.command(name="compile")(compile_)


def all_entries():
    """``module:ATTRIBUTE`` of every ``Entry`` defined at module level in the packages
    holding kernels, sorted."""
    import importlib
    import pkgutil

    import loopdyn
    from loopdyn.kernels.numba_internals import Entry

    names = []
    for sub in _ENTRY_PACKAGES:
        pkg = importlib.import_module(f"loopdyn.{sub}")
        for info in pkgutil.iter_modules(pkg.__path__, prefix=f"loopdyn.{sub}."):
            mod = importlib.import_module(info.name)
            for attr, value in vars(mod).items():
                if isinstance(value, Entry) and value.kernel.py_func.__module__ == info.name:
                    names.append(f"{info.name}:{attr}")
    del loopdyn
    return sorted(set(names))


def jobs_for(model, methods, simulate, everything):
    """The job strings of a ``compile`` command: ``entry:MODULE:ATTR``, ``workload``,
    ``method:NAME:MODEL``, ``simulate:MODEL``."""
    if everything:
        return [f"entry:{n}" for n in all_entries()] + ["workload"]
    if model is None:
        return ["workload"]
    jobs = [f"method:{m}:{model}" for m in methods]
    if simulate:
        jobs.append(f"simulate:{model}")
    return jobs


def run_job(job):
    """Compile (or load) what ``job`` needs in this process; returns ``"ok"`` or
    ``"skipped: REASON"`` (a method that does not apply to the model)."""
    import numpy as np

    from loopdyn.errors import LoopdynError
    from loopdyn.kernels import tiers

    kind, _, rest = job.partition(":")
    if kind == "entry":
        tiers.build([rest])
        return "ok"
    if kind == "workload":
        tiers.build([tiers.WORKLOAD])
        return "ok"
    import loopdyn as ld
    from loopdyn.cli_common import _load_model

    if kind == "method":
        name, _, spec = rest.partition(":")
        model = _load_model(spec, None)
        zero = np.zeros(model.nv)
        try:
            ld.forward_dynamics(model, model.q0, zero, zero, method=name)
        except LoopdynError as e:
            return f"skipped: {' '.join(str(e).split())}"
        return "ok"
    if kind == "simulate":
        model = _load_model(rest, None)
        try:
            ld.simulate(model, t_end=1e-3, t_eval=2, compiled=True)
        except (LoopdynError, ValueError) as e:  # the compiled loop does not apply
            return f"skipped: {' '.join(str(e).split())}"
        return "ok"
    raise ValueError(f"unknown compile job {job!r}")


def _worker(jobs):
    """``python -m loopdyn.cli_compile JOB ...``: run the jobs in turn under the
    ``compiled`` policy; one ``@@`` JSON line per job on stdout."""
    from loopdyn.kernels import tiers

    tiers.set_policy("compiled")
    status = 0
    for job in jobs:
        t0 = time.perf_counter()
        try:
            result, error = run_job(job), None
        except Exception as e:  # one line per failure, reported by the parent
            result, error = "failed", f"{type(e).__name__}: {' '.join(str(e).split())}"
            status = 1
        line = dict(job=job, result=result, error=error, s=time.perf_counter() - t0)
        print("@@" + json.dumps(line), flush=True)
    return status


def run_parallel(jobs, n_proc, on_done):
    """Run ``jobs`` in ``n_proc`` worker processes (job k to worker k mod n_proc);
    ``on_done(record)`` for each finished job (in this thread); returns the records
    (a job whose worker died without reporting it: ``failed``)."""
    src = str(Path(__file__).resolve().parents[1])  # the folder holding loopdyn
    env = dict(os.environ, LOOPDYN_TIER="compiled", LOOPDYN_BACKGROUND="0")
    env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    shares = [jobs[k::n_proc] for k in range(n_proc)]
    queue = Queue()
    procs = []
    for share in filter(None, shares):
        p = subprocess.Popen(
            [sys.executable, "-m", "loopdyn.cli_compile", *share],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        procs.append((p, share))

        def read(p=p):
            for line in p.stdout:
                if line.startswith("@@"):
                    queue.put(json.loads(line[2:]))
            queue.put(None)

        threading.Thread(target=read, daemon=True).start()
    records, open_ = {}, len(procs)
    while open_:
        rec = queue.get()
        if rec is None:
            open_ -= 1
            continue
        records[rec["job"]] = rec
        on_done(rec)
    for p, share in procs:
        err = p.stderr.read()
        p.wait()
        last = (err.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
        for job in share:
            if job not in records:
                records[job] = dict(job=job, result="failed", error=last, s=0.0)
                on_done(records[job])
    return [records[j] for j in jobs]


def _check_model(spec):
    """A model the workers can load, named before any of them starts: a catalog name or
    an existing file (what ``_load_model`` reads); else one line, exit 2."""
    from loopdyn import examples
    from loopdyn.cli_common import _errors
    from loopdyn.errors import ModelError

    with _errors():
        if spec not in examples.names() and not Path(spec).is_file():
            raise ModelError(
                f"{spec!r} is neither a catalog model nor a model file; catalog: "
                f"{', '.join(examples.names())}"
            )


def compile_(
    model: Annotated[
        str | None,
        typer.Argument(help="catalog model or model file (default: the README's four-bar)"),
    ] = None,
    everything: Annotated[
        bool, typer.Option("--all", help="every kernel entry of the package")
    ] = False,
    method: Annotated[
        list[str] | None,
        typer.Option("--method", "-m", help="only these methods (repeatable; default: all)"),
    ] = None,
    simulate: Annotated[
        bool, typer.Option(help="also the compiled simulation loop on MODEL")
    ] = True,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", "-j", min=1, help="worker processes (default: the CPU count)"),
    ] = None,
):
    """Build the compiled tier now (numba's disk cache) instead of in the background:
    the kernels MODEL's methods and simulation use, or all of them."""
    from loopdyn.methods.dynamics import METHODS

    con, err = _console(), _console(stderr=True)
    methods = list(method) if method else list(METHODS)
    for m in methods:
        if m not in METHODS:
            raise typer.BadParameter(f"unknown method {m!r}; available: {', '.join(METHODS)}")
    if model is not None and not everything:
        _check_model(model)
    todo = jobs_for(model, methods, simulate, everything)
    n_proc = max(1, min(jobs or os.cpu_count() or 1, len(todo)))
    t0 = time.perf_counter()
    failures = []

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("compiling"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as bar:
        task = bar.add_task("", total=len(todo))

        def done(rec):
            bar.update(task, advance=1, description=rec["job"])
            if rec["result"] == "failed":
                failures.append(rec)
                err.print(
                    f"[red]failed:[/] {_esc(rec['job'])}: {_esc(rec['error'])}", soft_wrap=True
                )
            elif rec["result"] != "ok":
                err.print(f"{_esc(rec['job'])}: {_esc(rec['result'])}", soft_wrap=True)

        run_parallel(todo, n_proc, done)
    cache = os.environ.get("NUMBA_CACHE_DIR") or "numba's default (__pycache__ beside the sources)"
    con.print(
        f"compiled {len(todo) - len(failures)} of {len(todo)} jobs in "
        f"{time.perf_counter() - t0:.1f} s, {n_proc} processes; cache: {_esc(cache)}",
        soft_wrap=True,
    )
    if failures:
        raise typer.Exit(1)


if __name__ == "__main__":  # the worker processes
    sys.exit(_worker(sys.argv[1:]))
