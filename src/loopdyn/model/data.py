"""``Data``: the preallocated workspace of a model, in one packed buffer.

Every kernel reads and writes a ``Data``; nothing is allocated per call.  The
buffer ``ctx`` and the meaning of every field are described in
``loopdyn.model.layout``; each field is an attribute here (a numpy view of
``ctx``), e.g. ``data.Xw`` (world poses), ``data.V`` (body velocities),
``data.J`` (closure Jacobian).  One ``Data`` per thread.

The dense blocks (``J``, ``M``, ``K``, ``Y``, ``Sm``, ``rhs``, ``piv``; O(nv²)) are
empty until a dense method (augmented, slm, sslm, recursive_lambda) or the dense
Jacobian (``ld.constraints``, rank detection) needs them: ``ensure_dense`` then
reallocates the buffer once.  The O(n) methods thus run in O(n) memory.
"""

import numpy as np

from loopdyn.model.layout import H_NROWS, allocate


class Data:
    """Preallocated workspace of ``model`` (``model.create_data()``).

    Attributes: ``ctx`` (the packed float64 buffer handed to the compiled
    entries), ``model``, one numpy view per field of ``loopdyn.model.layout``
    (``Xrel``, ``Xw``, ``S``, ``V``, ``A``, ``C``, ``F``, ``pA``, ``u``, ``IA``,
    ``U``, ``Dinv``, ``Phi``, ``J``, ``gamma``, ``M``, ...), and the caches of
    ``ld.forward_dynamics``: ``rank_info`` (independent closure rows at the last
    re-detection), ``plans`` (per-method symbolic plans) and ``bound`` (per-method
    entries bound to this Data).
    """

    def __init__(self, model, dense=False):
        self.model = model
        self.ctx, views = allocate(model, dense)
        self.__dict__.update(views)
        self._head = self.ctx[:8].view(np.int64)
        self.dense = bool(dense) or model.m == 0
        self.fext_zero = np.zeros((0, 6))
        self.rank_info = None
        self.plans = {}
        self.bound = {}

    def ensure_dense(self):
        """Give this Data its dense blocks (once): a new buffer with the same rows in
        use; entries bound to the old buffer are dropped (``bound``), plans kept.
        Returns self."""
        if self.dense:
            return self
        rows = self.rows[: self.nrows].copy()
        self.ctx, views = allocate(self.model, True)
        self.__dict__.update(views)
        self._head = self.ctx[:8].view(np.int64)
        self.set_rows(rows)
        self.bound.clear()
        self.dense = True
        if self.model._data is self:
            self.model._ctx = self.ctx  # the tree fast paths' handle
        return self

    def set_rows(self, rows):
        """Make ``rows`` (sorted closure row indices) the independent set the methods use."""
        n = len(rows)
        self.rows[:n] = rows
        self._head[H_NROWS] = n

    @property
    def nrows(self):
        """Number of independent closure rows the methods currently use."""
        return int(self._head[H_NROWS])
