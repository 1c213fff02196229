"""The kernel convention: ``algo(m, d, q, v, ...)`` on a model handle and a data handle.

``m`` and ``d`` are two small compiled objects over the same packed buffer of a
``Data`` (``loopdyn.model.layout``): ``m.topo``, ``m.inertia``, ``m.nv`` read the
model's arrays and sizes, ``d.Xrel``, ``d.J``, ``d.rows`` the workspaces, each
attribute a view built from the buffer's header (a few loads, no copy).  A handle
is passed between compiled functions as one array (a few machine words), so a
kernel calls another at the price of an ordinary call however many arrays it
reads; the attribute names are those of ``FIELDS`` (the papers' symbols).

Built with numba's documented extension API (a type, its data model, attribute
typing and lowering).  A handle holds only the buffer's data pointer, so neither it
nor its views carry a reference count: they are borrowed from the buffer the entry
received, never leave compiled code, and cost nothing to pass or drop in a function
compiled with or without numba's reference counting.
"""

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.imputils import impl_ret_untracked
from numba.core.typing.templates import AttributeTemplate
from numba.extending import (
    infer_getattr,
    intrinsic,
    lower_getattr_generic,
    models,
    register_model,
)
from numba.np.arrayobj import make_array, populate_array

from loopdyn.model.layout import FIELDS, H_OFF, SIZES

_BUF = types.float64[::1]


class _Handle(types.Type):
    """A view of a Data's buffer: the model's fields (``role="m"``) or the workspace's."""

    def __init__(self, role):
        self.role = role
        super().__init__(name="ModelView" if role == "m" else "DataView")


ModelViewType = _Handle("m")
DataViewType = _Handle("d")


@register_model(_Handle)
class _HandleModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("data", types.CPointer(types.float64))])


# attribute -> (kind, ...): ("size", slot) or ("field", index, integer, dims)
def _attributes(role):
    out = {}
    if role == "m":
        for slot, name in enumerate(SIZES):
            if name not in ("nrows", "nd", "nrd"):
                out[name] = ("size", slot)
    else:
        out["nrows"] = ("size", SIZES.index("nrows"))
    for k, (name, owner, integer, dims) in enumerate(FIELDS):
        if owner == role:
            out[name] = ("field", k, integer, dims)
    return out


_ATTRS = {"m": _attributes("m"), "d": _attributes("d")}


def _numba_type(spec):
    if spec[0] == "size":
        return types.int64
    _, _, integer, dims = spec
    return types.Array(types.int64 if integer else types.float64, len(dims), "C")


@infer_getattr
class _HandleAttributes(AttributeTemplate):
    key = _Handle

    def generic_resolve(self, typ, attr):
        spec = _ATTRS[typ.role].get(attr)
        return None if spec is None else _numba_type(spec)


_I64 = ir.IntType(64)


def _header(builder, data, slot):
    """The int64 in header slot ``slot`` of the buffer at ``data``."""
    ptr = builder.bitcast(data, _I64.as_pointer())
    return builder.load(builder.gep(ptr, [_I64(slot)]))


@lower_getattr_generic(_Handle)
def _handle_getattr(context, builder, typ, value, attr):
    spec = _ATTRS[typ.role][attr]
    handle = cgutils.create_struct_proxy(typ)(context, builder, value=value)
    buf = handle.data
    if spec[0] == "size":
        return impl_ret_untracked(context, builder, types.int64, _header(builder, buf, spec[1]))
    _, k, _, dims = spec
    aryty = _numba_type(spec)
    shape = []
    for dim in dims:
        if isinstance(dim, int):
            shape.append(cgutils.intp_t(dim))
        else:
            parts = [_header(builder, buf, SIZES.index(p)) for p in dim.split("+")]
            total = parts[0]
            for p in parts[1:]:
                total = builder.add(total, p)
            shape.append(total)
    strides = [None] * len(shape)
    acc = cgutils.intp_t(8)
    for i in range(len(shape) - 1, -1, -1):
        strides[i] = acc
        acc = builder.mul(acc, shape[i])
    data = builder.gep(buf, [_header(builder, buf, H_OFF + k)])
    out = make_array(aryty)(context, builder)
    populate_array(
        out,
        data=builder.bitcast(data, out.data.type),
        shape=shape,
        strides=strides,
        itemsize=cgutils.intp_t(8),
        meminfo=None,
        parent=None,
    )
    return impl_ret_untracked(context, builder, aryty, out._getvalue())


@intrinsic
def handles(typingctx, buf):
    """``(m, d)``: the model and data handles of a Data's buffer ``ctx``."""
    if buf != _BUF:
        return None
    sig = types.Tuple((ModelViewType, DataViewType))(buf)

    def codegen(context, builder, sig, args):
        data = make_array(buf)(context, builder, args[0]).data
        m = cgutils.create_struct_proxy(ModelViewType)(context, builder)
        d = cgutils.create_struct_proxy(DataViewType)(context, builder)
        m.data = data
        d.data = data
        return context.make_tuple(builder, sig.return_type, [m._getvalue(), d._getvalue()])

    return sig, codegen


__all__ = ["DataViewType", "ModelViewType", "handles"]
