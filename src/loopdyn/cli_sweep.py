"""``loopdyn sweep`` and ``loopdyn sweep-plot``: parameter sweeps on Dask (``ld.sweep``).

    loopdyn sweep four_bar --param theta1=30deg:90deg:20 --param tau=-5:5:50 \\
        --t-end 5 --out results.parquet [--scheduler tcp://host:8786] [--workers N]
    loopdyn sweep --resume --out results.parquet           # finish a killed sweep
    loopdyn sweep-plot results.parquet --x theta1 --y tau --value energy_drift --out map.png

``--param NAME=SPEC`` (repeat it; the grid is the cartesian product, the first varying
slowest): ``START:STOP:NUM`` (NUM evenly spaced values, ends included), ``A,B,C`` (a list)
or one value.  Catalog parameters keep their units (angles need ``deg`` or ``rad``, as
``loopdyn simulate -p``); the run's parameters (``tau``, ``tau_<k>``, ``v0``,
``v0_<k>``, or a ``simulate`` option such as ``rtol``) are plain numbers.
Registered on the main command line by ``register(app)`` (one line in ``cli.py``).
Errors print one line and exit with status 2.
"""

import inspect
import time
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from loopdyn.methods.dynamics import METHODS
from loopdyn.sim.integrators import INTEGRATORS
from loopdyn.sim.stabilization import STABILIZATIONS


def register(app):
    """Add the ``sweep`` and ``sweep-plot`` commands to the typer ``app``."""
    app.command(name="sweep")(sweep)
    app.command(name="sweep-plot")(sweep_plot)


def parse_param(text, units, max_cases=None):
    """``NAME=SPEC`` -> (name, list of values); ``units``: catalog parameter -> unit.
    A range of more than ``max_cases`` values (default ``loopdyn.sweeps.MAX_CASES``) is
    refused before its values are made."""
    from loopdyn import cli_common as cli
    from loopdyn.sweeps import MAX_CASES, grid_too_large

    max_cases = MAX_CASES if max_cases is None else max_cases

    if "=" not in text:
        raise cli._Usage(
            f"--param: expected NAME=START:STOP:NUM, NAME=A,B,C or NAME=X, got {text!r}"
        )
    name, spec = (x.strip() for x in text.split("=", 1))
    if not name or not spec:
        raise cli._Usage(f"--param: expected NAME=VALUES, got {text!r}")
    unit = units.get(name)
    if ":" in spec:
        parts = spec.split(":")
        if len(parts) != 3:
            raise cli._Usage(f"--param {name}: a range is START:STOP:NUM, got {spec!r}")
        a, b = (cli._parse_value(p, unit, name) for p in parts[:2])
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b)):
            raise cli._Usage(f"--param {name}: a range needs numbers, got {spec!r}")
        try:
            num = int(parts[2])
        except ValueError:
            raise cli._Usage(f"--param {name}: NUM must be an integer, got {parts[2]!r}") from None
        if num < 1:
            raise cli._Usage(f"--param {name}: NUM must be at least 1, got {num}")
        too_large = grid_too_large({name: num}, max_cases, "--max-cases")
        if too_large:
            raise cli._Usage(too_large)
        values = np.linspace(float(a), float(b), num).tolist()
        if unit in ("count", "seed"):
            values = sorted({round(v) for v in values})
        return name, values
    value = cli._parse_value(spec, unit, name)
    values = value if isinstance(value, list) else [value]
    for v in values:
        if isinstance(v, float) and not np.isfinite(v):
            raise cli._Usage(f"--param {name}: values must be finite, got {spec!r}")
    return name, values


def sweep(
    model: Annotated[str | None, typer.Argument(help="catalog name (loopdyn models)")] = None,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", "-p", help="NAME=START:STOP:NUM, NAME=A,B,C or NAME=X"),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="results store (a folder, e.g. x.parquet)")
    ] = None,
    run: Annotated[
        str, typer.Option(help="simulate, forward_dynamics or singularity_map")
    ] = "simulate",
    t_end: Annotated[
        float | None, typer.Option("--t-end", "-T", help="simulate: simulated time (s), 5 if unset")
    ] = None,
    method: Annotated[
        str | None, typer.Option("--method", "-m", help="forward dynamics: " + " ".join(METHODS))
    ] = None,
    integrator: Annotated[
        str | None,
        typer.Option(
            "--integrator", "-i", help="simulate: " + " ".join(INTEGRATORS) + " (DOP853 if unset)"
        ),
    ] = None,
    stabilization: Annotated[
        str | None, typer.Option(help="simulate: " + " ".join(STABILIZATIONS))
    ] = None,
    rtol: Annotated[float | None, typer.Option(help="simulate: relative tolerance")] = None,
    atol: Annotated[float | None, typer.Option(help="simulate: absolute tolerance")] = None,
    dt: Annotated[float | None, typer.Option(help="simulate: RK4 step (s)")] = None,
    scheduler: Annotated[
        str | None, typer.Option(help="Dask scheduler address (tcp://host:8786)")
    ] = None,
    workers: Annotated[
        int | None, typer.Option(help="local worker processes (default: one per core; 0: none)")
    ] = None,
    chunk: Annotated[int | None, typer.Option(help="cases per task")] = None,
    max_cases: Annotated[
        int | None, typer.Option(help="the largest grid, in cases (default 1000000)")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="finish the sweep stored in --out")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
):
    """Run a simulation or analysis over a grid of parameters, on Dask; resumable."""
    import loopdyn as ld
    from loopdyn import cli_common as cli
    from loopdyn.sim.simulate import check_arguments
    from loopdyn.sweeps import MAX_CASES, grid_too_large, read_manifest

    con = cli._console()
    with cli._errors():
        if out is None:
            raise cli._Usage("--out: give the results store (a folder, e.g. results.parquet)")
        if scheduler is not None and workers is not None:
            raise cli._Usage("--workers starts local workers; --scheduler uses a cluster: not both")
        if workers is not None and workers < 0:
            raise cli._Usage(f"--workers must be >= 0, got {workers}")
        if chunk is not None and chunk < 1:
            raise cli._Usage(f"--chunk must be at least 1, got {chunk}")
        if max_cases is not None and max_cases < 1:
            raise cli._Usage(f"--max-cases must be at least 1, got {max_cases}")
        max_cases = MAX_CASES if max_cases is None else max_cases
        given = dict(
            t_end=t_end, method=method, integrator=integrator, stabilization=stabilization,
            rtol=rtol, atol=atol, dt=dt,
        )  # fmt: skip
        options = {k: v for k, v in given.items() if v is not None}
        if resume:
            if model is not None or param or options:
                raise cli._Usage(
                    "--resume finishes the sweep stored in --out: give no MODEL, --param or "
                    "run options"
                )
            manifest, cases = read_manifest(out)
            if not manifest.get("cli_resumable"):
                raise cli._Usage(
                    f"{str(out)!r} holds a sweep of a Python callable ({manifest.get('run')}): "
                    "resume it from Python with ld.sweep(..., resume=True)"
                )
            model, run, options = manifest["model"], manifest["run"], manifest["options"] or {}
            grid = cases.drop(columns="case")
        else:
            if model is None:
                raise cli._Usage("give the MODEL to sweep (loopdyn models), or --resume")
            if not param:
                raise cli._Usage("give at least one --param NAME=START:STOP:NUM")
            units = {p.name: p.unit for p in ld.examples.parameters(model)}
            grid, shown = {}, {}
            for p in param:
                name, values = parse_param(p, units, max_cases)
                if name in grid:
                    raise cli._Usage(f"--param {name} is given twice")
                grid[name] = values
                if units.get(name) == "rad":  # plotted in the unit given (stored in rad)
                    given = p.split("=", 1)[1].lower()
                    shown[name] = "deg" if "deg" in given else "rad"
            sizes = {k: len(v) for k, v in grid.items()}
            too_large = grid_too_large(sizes, max_cases, "--max-cases")
            if too_large:
                raise cli._Usage(too_large)
            if run == "simulate":
                options.setdefault("t_end", 5.0)
                if not set(grid) & set(inspect.signature(check_arguments).parameters):
                    check_arguments(**options, names=cli.SIMULATE_OPTIONS)  # before any work
        start = time.perf_counter()
        try:
            df = ld.sweep(
                model, grid, run, client=scheduler, n_workers=workers, store=out,
                resume=resume, chunk=chunk, progress=not quiet, max_cases=max_cases,
                units=None if resume else shown, **options,
            )  # fmt: skip
        except ImportError as e:
            raise cli._Usage(str(e)) from None
        except KeyboardInterrupt:
            _interrupted(out, scheduler)
    total = time.perf_counter() - start
    failed = int(df["error"].notna().sum())
    con.print(
        f"{len(df)} cases ({failed} failed) in {total:.1f} s; wall time per case "
        f"{df['wall_time'].median() * 1e3:.2f} ms (median); stored in {out}",
        soft_wrap=True,
    )
    if failed:
        first = df.loc[df["error"].notna()].iloc[0]
        con.print(
            f"first failure: case {int(first['case'])}: {cli._esc(first['error'])}", soft_wrap=True
        )


def _interrupted(out, scheduler):
    """Ctrl-C: one line on stderr (cases stored, where, the command that continues the
    sweep), exit status 130; the finished tasks' parts are in the store already."""
    import logging
    import shlex

    from loopdyn import cli_common as cli
    from loopdyn.sweeps import read_manifest, read_sweep

    for name in ("distributed", "tornado", "asyncio"):  # no shutdown tracebacks after this
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    try:
        total = read_manifest(out)[0].get("cases")
        done = len(read_sweep(out))
    except Exception:  # interrupted before the store was written
        total, done = None, 0
    again = f"loopdyn sweep --resume --out {shlex.quote(str(out))}"
    if scheduler is not None:
        again += f" --scheduler {shlex.quote(scheduler)}"
    of = f" of {total}" if total is not None else ""
    cli._console(stderr=True).print(
        f"interrupted: {done}{of} cases done, stored in {cli._esc(out)}; continue with: "
        f"{cli._esc(again)}",
        soft_wrap=True,
    )
    raise typer.Exit(130)


def sweep_plot(
    store: Annotated[Path, typer.Argument(help="results store written by loopdyn sweep --out")],
    x: Annotated[str, typer.Option("--x", help="parameter on the horizontal axis")],
    y: Annotated[str, typer.Option("--y", help="parameter on the vertical axis")],
    value: Annotated[
        str, typer.Option("--value", help="outcome to colour (energy_drift, status, ...)")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="the figure (.png, .pdf, .svg)")],
    agg: Annotated[
        str | None, typer.Option(help="cases sharing a cell: mean, max, min or median")
    ] = None,
    log: Annotated[
        bool | None, typer.Option("--log/--linear", help="colour scale (default: automatic)")
    ] = None,
):
    """Heat map of a sweep's outcome over two parameters (ld.plot_sweep)."""
    import loopdyn as ld
    from loopdyn import cli_common as cli

    with cli._errors():
        cli._check_output(out, (".png", ".pdf", ".svg"), "--out")
        if not Path(store).is_dir():
            raise cli._Usage(f"sweep store {str(store)!r} not found")
        import matplotlib.pyplot as plt

        fig = ld.plot_sweep(store, x, y, value, out, agg=agg, log=log)
        plt.close(fig)
    cli._console().print(f"wrote {out}")
