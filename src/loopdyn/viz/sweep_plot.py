"""Heat map of a sweep's outcome over two parameters: ``ld.plot_sweep``.

    ld.plot_sweep("results.parquet", x="theta1", y="tau", value="energy_drift", path="map.png")

Cells are the cases at each (x, y) pair, drawn with ``pcolormesh`` on edges halfway
between the sorted parameter values (uneven spacing is kept).  A numeric outcome gets a
colour bar (logarithmic when it is positive and spans more than three decades, or
``log=True``); a text outcome (``status``) one colour per value, named in the legend.
Cases that failed (an ``error``) or have no value are grey and counted in the title.
"""

import numpy as np

from loopdyn.viz.plotting import _pyplot

_AGG = {"mean": np.nanmean, "max": np.nanmax, "min": np.nanmin, "median": np.nanmedian}


def plot_sweep(
    results, x, y, value, path=None, *, agg=None, log=None, ax=None, title=None, units=None
):
    """Draw ``value`` over parameters ``x`` and ``y``; the matplotlib Figure.

    In: ``results``: a DataFrame from ``ld.sweep`` / ``ld.read_sweep`` or a store path.
    ``x``, ``y``: parameter (or outcome) columns; ``value``: an outcome column.
    ``agg``: when several cases share an (x, y) cell (other parameters vary): ``"mean"``,
    ``"max"``, ``"min"`` or ``"median"`` of the numeric value (None: refused, a
    ``ValueError`` naming the cell).  ``log``: colour scale (None: automatic).
    ``path``: write the figure there (.png, .pdf, .svg).  ``ax``: draw into these axes.
    ``units``: parameter -> unit (default: a store's own, from its manifest: the catalog
    units and the unit the sweep was given in); an axis is labelled ``name (unit)``, and
    an angle given in ``deg`` is drawn in degrees (stored in radians).
    """
    from loopdyn.sweeps import _need, read_manifest, read_sweep

    pd = _need("pandas")  # a LoopdynError naming the extra, not an ImportError

    if isinstance(results, pd.DataFrame):
        df = results
    else:
        df = read_sweep(results)
        if units is None:
            units = read_manifest(results)[0].get("units") or {}
    units = dict(units or {})
    for c in (x, y, value):
        if c not in df.columns:
            cols = ", ".join(c for c in df.columns if c not in ("case", "error"))
            raise ValueError(f"plot_sweep: no column {c!r}; the columns are {cols}")
    if x == y:
        raise ValueError("plot_sweep: x and y must be two different columns")
    if agg is not None and agg not in _AGG:
        raise ValueError(f"plot_sweep: agg must be one of {', '.join(_AGG)}, got {agg!r}")
    if len(df) == 0:
        raise ValueError("plot_sweep: the results hold no case")
    shown = {c: np.rad2deg(df[c].to_numpy(dtype=float)) for c in (x, y) if units.get(c) == "deg"}
    if shown:
        df = df.assign(**shown)  # stored in radians, drawn in the degrees given
    failed = df["error"].notna() if "error" in df.columns else pd.Series(False, index=df.index)
    xs, ys = np.unique(df[x].to_numpy()), np.unique(df[y].to_numpy())
    ix = np.searchsorted(xs, df[x].to_numpy())
    iy = np.searchsorted(ys, df[y].to_numpy())
    counts = np.zeros((ys.size, xs.size), dtype=np.int64)
    np.add.at(counts, (iy, ix), 1)
    if agg is None and counts.max() > 1:
        k = np.argwhere(counts > 1)[0]
        raise ValueError(
            f"plot_sweep: {counts.max()} cases share the cell {x} = {xs[k[1]]}, "
            f"{y} = {ys[k[0]]} (other parameters vary): choose agg= mean, max, min or median"
        )
    vals = df[value]
    text = vals.dtype == object or isinstance(vals.dtype, pd.StringDtype)
    ok = ~failed.to_numpy() & vals.notna().to_numpy()
    if text:
        if agg is not None and counts.max() > 1:
            raise ValueError(f"plot_sweep: {value!r} is text: it cannot be aggregated")
        cats = sorted(set(vals[ok].astype(str)))
        code = np.array([cats.index(str(v)) if o else -1 for v, o in zip(vals, ok, strict=True)])
        numeric = code.astype(float)
        numeric[~ok] = np.nan
    else:
        numeric = vals.to_numpy(dtype=float, na_value=np.nan).copy()
        numeric[~ok] = np.nan
    grid = np.full((ys.size, xs.size), np.nan)
    if agg is None:
        grid[iy, ix] = numeric
    else:
        cells = {}
        for a, b, v in zip(iy, ix, numeric, strict=True):
            cells.setdefault((a, b), []).append(v)
        for (a, b), v in cells.items():
            v = np.asarray(v)
            if np.isfinite(v).any():
                grid[a, b] = _AGG[agg](v)
    plt = _pyplot()
    import matplotlib.colors as mcolors

    fig = None
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 4.8))
    else:
        fig = ax.figure
    cmap = plt.get_cmap("viridis" if not text else "tab10").with_extremes(bad="0.8")
    masked = np.ma.masked_invalid(grid)
    kw = {}
    if text:
        colors = [cmap(i % 10) for i in range(max(len(cats), 1))]
        cmap = mcolors.ListedColormap(colors).with_extremes(bad="0.8")
        kw["norm"] = mcolors.BoundaryNorm(np.arange(len(cats) + 1) - 0.5, cmap.N)
    else:
        fin = grid[np.isfinite(grid)]
        if log is None:
            log = fin.size > 0 and fin.min() > 0 and fin.max() / fin.min() > 1e3
        if log:
            if fin.size and fin.min() <= 0:
                raise ValueError(f"plot_sweep: log scale of {value!r} needs positive values")
            kw["norm"] = mcolors.LogNorm()
    mesh = ax.pcolormesh(_edges(xs), _edges(ys), masked, cmap=cmap, shading="flat", **kw)
    for axis, v in ((ax.xaxis, xs), (ax.yaxis, ys)):
        if not _is_numeric(v):  # text parameters (a method name): one labelled cell each
            axis.set_ticks(np.arange(v.size), [str(t) for t in v])
    if text:
        from matplotlib.patches import Patch

        ax.legend(
            handles=[Patch(color=cmap(i), label=c) for i, c in enumerate(cats)],
            title=value,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
        )
    else:
        fig.colorbar(mesh, ax=ax, label=value if agg is None else f"{agg} of {value}")
    ax.set_xlabel(axis_label(x, units))
    ax.set_ylabel(axis_label(y, units))
    nbad = int(np.sum(~np.isfinite(grid)))
    head = title or f"{value} over {x} × {y}"
    ax.set_title(head + (f" ({nbad} cells failed or empty: grey)" if nbad else ""))
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig


def axis_label(name, units):
    """``name (unit)`` when ``units`` has one for ``name``, else ``name``."""
    unit = (units or {}).get(name)
    return f"{name} ({unit})" if unit else name


def _is_numeric(values):
    return all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in values)


def _edges(values):
    """Cell edges halfway between sorted values (one cell of width 1 for one value);
    text values sit at 0, 1, 2, ..."""
    v = (
        np.asarray(values, dtype=float)
        if _is_numeric(values)
        else np.arange(len(values), dtype=float)
    )
    if v.size == 1:
        return np.array([v[0] - 0.5, v[0] + 0.5])
    mid = 0.5 * (v[1:] + v[:-1])
    return np.concatenate([[2 * v[0] - mid[0]], mid, [2 * v[-1] - mid[-1]]])
