"""The ``loopdyn`` command line: ``loopdyn models``, ``loopdyn simulate MODEL ...``,
``loopdyn bench MODEL``.

    loopdyn simulate four_bar -p theta1=90deg --t-end 5 --out traj.csv \\
        --plot traj.png --animate traj.gif
"""

import sys
import time
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

app = typer.Typer(
    name="loopdyn",
    help="Exact, fast dynamics of closed-loop multibody systems.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _console(stderr=False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def _esc(obj):
    """str(obj) with rich markup escaped (messages hold [..] lists)."""
    from rich.markup import escape

    return escape(str(obj))


def _parse_value(text):
    """'90deg' -> radians, '3' -> int, '0.5' -> float, 'true'/'false' -> bool."""
    t = text.strip()
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    if low.endswith("deg"):
        return float(np.deg2rad(float(t[:-3])))
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        return t


def _parse_params(params):
    out = {}
    for p in params or []:
        if "=" not in p:
            raise typer.BadParameter(f"expected KEY=VALUE, got {p!r}", param_hint="--param")
        k, v = p.split("=", 1)
        out[k.strip()] = _parse_value(v)
    return out


def _parse_vector(text, what):
    if text is None:
        return None
    try:
        return np.array([_as_float(x) for x in text.replace(" ", ",").split(",") if x], float)
    except ValueError:
        raise typer.BadParameter(
            f"{what}: expected comma-separated numbers, got {text!r}"
        ) from None


def _as_float(x):
    v = _parse_value(x)
    if isinstance(v, bool | str):
        raise ValueError(x)
    return float(v)


@app.command()
def models():
    """List the mechanism catalog: bodies, coordinates, loops, degrees of freedom."""
    from rich.table import Table

    import loopdyn as ld

    table = Table(title="loopdyn catalog (ld.examples.get(name))")
    table.add_column("name", no_wrap=True)
    for col in ("bodies", "nq", "nv", "loops", "rows", "DOF", "actuated"):
        table.add_column(col, justify="right")
    table.add_column("description", min_width=20)
    for name in ld.examples.names():
        m = ld.examples.get(name)
        table.add_row(
            name,
            str(m.nbodies),
            str(m.nq),
            str(m.nv),
            str(m.nc),
            str(m.m),
            str(ld.degrees_of_freedom(m)),
            str(m.actuated.size),
            m.description,
        )
    _console().print(table)


@app.command()
def simulate(
    model: Annotated[str, typer.Argument(help="catalog name (see `loopdyn models`)")],
    t_end: Annotated[float, typer.Option("--t-end", "-T", help="simulated time (s)")] = 5.0,
    method: Annotated[str, typer.Option("--method", "-m", help="forward dynamics")] = "augmented",
    integrator: Annotated[
        str, typer.Option("--integrator", "-i", help="RK45 DOP853 Radau BDF LSODA RK4")
    ] = "DOP853",
    stabilization: Annotated[
        str,
        typer.Option("--stabilization", "-s", help="none baumgarte projection partitioning"),
    ] = "projection",
    rtol: Annotated[float, typer.Option(help="relative tolerance (adaptive)")] = 1e-8,
    atol: Annotated[float, typer.Option(help="absolute tolerance (adaptive)")] = 1e-8,
    dt: Annotated[float | None, typer.Option(help="RK4 step (s)")] = None,
    points: Annotated[int, typer.Option(help="number of output times")] = 501,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", "-p", help="model parameter KEY=VALUE, e.g. theta1=90deg"),
    ] = None,
    q0: Annotated[str | None, typer.Option(help="initial q, comma-separated")] = None,
    v0: Annotated[str | None, typer.Option(help="initial v, comma-separated")] = None,
    tau: Annotated[
        str | None, typer.Option(help="constant joint forces (nv or one per actuator)")
    ] = None,
    independent: Annotated[
        str | None, typer.Option(help="partitioning: initial independent coordinates, e.g. 0,2")
    ] = None,
    repartition: Annotated[
        bool, typer.Option(help="partitioning: re-choose them when ill-conditioned")
    ] = True,
    out: Annotated[Path | None, typer.Option(help="write the trajectory (.csv or .npz)")] = None,
    plot: Annotated[Path | None, typer.Option(help="write a figure (.png, .pdf, .svg)")] = None,
    animate: Annotated[Path | None, typer.Option(help="write an animation (.gif or .mp4)")] = None,
    fps: Annotated[int, typer.Option(help="animation frames per second")] = 30,
    speed: Annotated[float, typer.Option(help="animation: simulated s per video s")] = 1.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
):
    """Simulate a catalog model and write the trajectory, a plot and an animation."""
    import loopdyn as ld

    con, err = _console(), _console(stderr=True)
    try:
        mdl = ld.examples.get(model, **_parse_params(param))
    except (ld.LoopdynError, TypeError, ValueError) as e:
        err.print(f"[red]error:[/] {_esc(e)}")
        raise typer.Exit(2) from None
    ind = _parse_vector(independent, "--independent")
    kw = dict(
        independent=None if ind is None else ind.astype(int),
        repartition=repartition,
        integrator=integrator,
        stabilization=stabilization,
        rtol=rtol,
        atol=atol,
        dt=dt,
        t_eval=int(points),
    )
    tau_v = _parse_vector(tau, "--tau")
    traj, failure = None, None
    start = time.perf_counter()
    try:  # load the compiled kernels first, so that the integration time is the run's own
        ld.simulate(mdl, t_end=1e-6, t_eval=2, method=method)
    except (ValueError, ld.LoopdynError):
        pass
    with _progress(quiet, err) as progress:
        task = progress.add_task(f"{mdl.name} {method}/{integrator}/{stabilization}", total=t_end)
        last = [0.0]

        def report(t, t_total):
            now = time.perf_counter()
            if now - last[0] > 0.05 or t >= t_total:
                last[0] = now
                progress.update(task, completed=t)

        try:
            traj = ld.simulate(
                mdl,
                _parse_vector(q0, "--q0"),
                _parse_vector(v0, "--v0"),
                t_end,
                tau=tau_v,
                method=method,
                progress=report,
                **kw,
            )
        except ld.SimulationError as e:
            traj, failure = e.trajectory, e
        except (ValueError, ld.LoopdynError) as e:
            err.print(f"[red]error:[/] {_esc(e)}")
            raise typer.Exit(2) from None
    total = time.perf_counter() - start
    _summary(con, traj, total)
    if failure is not None:
        err.print(f"[red]simulation stopped:[/] {_esc(failure)}")
    written = []
    if out is not None:
        if out.suffix.lower() == ".npz":
            traj.save(out)
        else:
            traj.to_csv(out)
        written.append(out)
    if plot is not None:
        import matplotlib.pyplot as plt

        fig = traj.plot(plot)
        plt.close(fig)
        written.append(plot)
    if animate is not None:
        try:
            traj.animate(animate, model=mdl, fps=fps, speed=speed)
            written.append(animate)
        except (RuntimeError, ValueError) as e:
            err.print(f"[red]animation:[/] {_esc(e)}")
            raise typer.Exit(2) from None
    for p in written:
        con.print(f"wrote {p}")
    if failure is not None:
        raise typer.Exit(1)


class _NoProgress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def add_task(self, *a, **k):
        return 0

    def update(self, *a, **k):
        pass


def _progress(quiet, console):
    if quiet or not console.is_terminal:
        return _NoProgress()
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("t = {task.completed:.3g} / {task.total:.3g} s"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def _summary(con, traj, total):
    from rich.table import Table

    s = traj.summary()
    e0 = float(traj.energy[0]) if len(traj) else 0.0
    rel = s["max_energy_drift"] / max(abs(e0), 1e-300) if len(traj) else 0.0
    table = Table(title=f"{s['model']}: {s['method']} / {s['integrator']} / {s['stabilization']}")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    rows = [
        ("simulated time", f"{s['t_end']:.6g} s" + ("" if s["completed"] else " (stopped)")),
        ("steps", f"{s['steps']}"),
        ("right-hand sides", f"{s['nfev']}"),
        ("wall time (integration)", f"{s['wall_time']:.3f} s"),
        ("wall time (total)", f"{total:.3f} s"),
        ("max closure residual |Φ|", f"{s['max_residual_position']:.2e}"),
        ("max velocity residual |J v|", f"{s['max_residual_velocity']:.2e}"),
        ("energy E(0)", f"{e0:.10g} J"),
        ("max |E(t) - E(0)|", f"{s['max_energy_drift']:.2e} J ({rel:.1e} relative)"),
    ]
    if s["repartitions"]:
        rows.append(("re-partitions", f"{s['repartitions']}"))
    for k, v in rows:
        table.add_row(k, v)
    con.print(table)


@app.command()
def bench(
    model: Annotated[str, typer.Argument(help="catalog model, e.g. four_bar")] = "four_bar",
    param: Annotated[
        list[str] | None, typer.Option("--param", "-p", help="KEY=VALUE for the factory")
    ] = None,
    method: Annotated[
        list[str] | None, typer.Option("--method", "-m", help="methods to time (default: all)")
    ] = None,
    seconds: Annotated[float, typer.Option(help="time budget per method")] = 0.3,
):
    """Time forward dynamics per call for each method (and Pinocchio, if installed).

    Every method's q̈ is compared with the augmented oracle; Pinocchio's
    constraintDynamics is timed alongside when the model's closures are
    expressible there.  The full benchmarks live in ``benchmarks/``.
    """
    import timeit

    from rich.table import Table

    import loopdyn as ld

    m = ld.examples.get(model, **_parse_params(param))
    rng = np.random.default_rng(0)
    q = np.array(m.q0)
    v = np.zeros(m.nv)
    v[m.actuated] = rng.normal(size=m.actuated.size)
    v = ld.complete_velocity(m, q, v) if m.m else rng.normal(size=m.nv)
    tau = np.zeros(m.nv)
    tau[m.actuated] = rng.normal(size=m.actuated.size)
    ref = ld.forward_dynamics(m, q, v, tau).qdd
    scale = max(np.abs(ref).max(), 1e-300)

    def per_call(fn):
        fn()
        n = max(1, int(seconds / max(timeit.timeit(fn, number=3) / 3, 1e-9) / 5))
        return min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6

    rows = []
    for name in method or list(ld.methods.dynamics.METHODS):
        if name not in ld.methods.dynamics.METHODS:
            raise typer.BadParameter(
                f"unknown method {name!r}; use {', '.join(ld.methods.dynamics.METHODS)}"
            )
        err = np.abs(ld.forward_dynamics(m, q, v, tau, method=name).qdd - ref).max() / scale
        t = per_call(lambda name=name: ld.forward_dynamics(m, q, v, tau, method=name))
        rows.append((f"loopdyn {name}", t, err))
    try:
        import pinocchio as pin

        from loopdyn.interop.pinocchio import PinocchioExport
    except ImportError:
        pin = None
    ex = PinocchioExport(m) if pin is not None and m.m else None
    if ex is not None and not ex.unexported:
        qdd_pin = ex.constraint_dynamics(q, v, tau)
        pd = ex.model.createData()
        cds = ex.constraint_datas()
        pin.initConstraintDynamics(ex.model, pd, ex.constraints, cds)
        prox = pin.ProximalSettings(1e-12, 1e-8, 20)
        args = (ex.model, pd, ex.q(q), ex.v(v), ex.v(tau), ex.constraints, cds, prox)
        t = per_call(lambda: pin.constraintDynamics(*args))
        rows.append(("pin.constraintDynamics", t, np.abs(qdd_pin - ref).max() / scale))
    table = Table(title=f"{model}: forward dynamics per call (nv={m.nv}, m={m.m})")
    for col, just in (("implementation", "left"), ("µs/call", "right"), ("rel. error", "right")):
        table.add_column(col, justify=just)
    for name, t, err in rows:
        table.add_row(name, f"{t:.2f}", f"{err:.1e}")
    _console().print(table)


def main():  # pragma: no cover - console entry
    app(prog_name="loopdyn")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
