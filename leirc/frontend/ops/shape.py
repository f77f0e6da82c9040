"""Views, layout and creation: size/dim queries, casts, view/reshape/permute/expand, indexing, split/cat, constants."""

from __future__ import annotations

import math

from .. import builder as B
from .. import values as Vs
from ..errors import UnsupportedOpError
from ..values import ConstVal, ExprVal, TensorRef, Val, View, norm_dim
from .base import OpsBase
from .common import TORCH_OF_LEIR, leir_dtype, torch_size
from .registry import function, method


class ShapeOps(OpsBase):
    @method('size')
    def t_size(self, x, dim=None):
        if dim is None:
            return torch_size(x.shape)
        return x.shape[norm_dim(dim, x.ndim)]

    @method('dim')
    def t_dim(self, x):
        return x.ndim

    t_ndimension = method('ndimension')(t_dim)

    @method('numel')
    def t_numel(self, x):
        return x.numel

    f_numel = function('numel')(t_numel)

    @function('_assert')
    def f__assert(self, condition, message=None):
        """Guards fx inserts for concrete (non-tensor) arguments: already true here."""
        return None

    # ------------------------------------------------------------------
    # identity-like

    @function('contiguous')
    def f_contiguous(self, x, memory_format=None):
        return x

    @function('clone')
    def f_clone(self, x, memory_format=None):
        return x

    @function('detach')
    def f_detach(self, x):
        return x

    @method('requires_grad_')
    def t_requires_grad_(self, x, requires_grad=True):
        return x

    @function('cpu')
    def f_cpu(self, x, *a, **k):
        return x

    @function('cuda')
    def f_cuda(self, x, *a, **k):
        return x

    @function('dropout')
    def f_dropout(self, input, p=0.5, training=True, inplace=False):
        if p == 0 or not training:
            return input
        raise UnsupportedOpError(f"dropout with p={p} in training mode is random (cannot be compared); "
                                 "put the model in eval mode or use p=0")

    f_dropout1d = f_dropout2d = f_dropout3d = f_alpha_dropout = f_feature_alpha_dropout = function('dropout1d', 'dropout2d', 'dropout3d', 'alpha_dropout', 'feature_alpha_dropout')(f_dropout)

    def _cast(self, x, dt: str):
        if x.dtype == dt:
            return x
        return self.ew([x], lambda e: B.call(dt, e), dtype=dt)

    @method('float')
    def t_float(self, x, memory_format=None):
        return self._cast(x, "f32")

    @method('double')
    def t_double(self, x, memory_format=None):
        return self._cast(x, "f64")

    @method('half')
    def t_half(self, x, memory_format=None):
        return self._cast(x, "f16")

    @method('long')
    def t_long(self, x, memory_format=None):
        return self._cast(x, "i64")

    @method('int')
    def t_int(self, x, memory_format=None):
        return self._cast(x, "i32")

    @method('bool')
    def t_bool(self, x, memory_format=None):
        return self._cast(x, "bool")

    @method('to')
    def t_to(self, x, *args, **kwargs):
        import torch

        dt = kwargs.get("dtype")
        for a in args:
            if isinstance(a, torch.dtype):
                dt = a
            elif isinstance(a, Val):
                dt = getattr(torch, TORCH_OF_LEIR[a.dtype])
        if dt is None:
            return x
        return self._cast(x, leir_dtype(dt))

    @method('type')
    def t_type(self, x, dtype=None, non_blocking=False, **kw):
        if dtype is None:
            raise UnsupportedOpError("Tensor.type() without a dtype")
        return self.t_to(x, dtype)

    @method('type_as')
    def t_type_as(self, x, other):
        return self._cast(x, other.dtype)

    # ------------------------------------------------------------------
    # views

    @method('view')
    def t_view(self, x, *shape, **kw):
        import torch

        if "size" in kw:
            shape = (kw["size"],)
        if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
            shape = tuple(shape[0])
        if len(shape) == 1 and not isinstance(shape[0], int):
            raise UnsupportedOpError("Tensor.view(dtype) is not supported")
        return Vs.reshape(x, shape)

    t_reshape = method('reshape')(t_view)

    @function('reshape')
    def f_reshape(self, input, shape):
        return Vs.reshape(input, tuple(shape))

    @method('view_as')
    def t_view_as(self, x, other):
        return Vs.reshape(x, other.shape)

    t_reshape_as = method('reshape_as')(t_view_as)

    @function('flatten')
    def f_flatten(self, input, start_dim=0, end_dim=-1):
        return Vs.flatten(input, start_dim, end_dim)

    @function('unflatten')
    def f_unflatten(self, input, dim, sizes):
        d = norm_dim(dim, input.ndim)
        sizes = list(sizes)
        if -1 in sizes:
            rest = math.prod(s for s in sizes if s != -1)
            sizes[sizes.index(-1)] = input.shape[d] // rest
        return Vs.reshape(input, list(input.shape[:d]) + sizes + list(input.shape[d + 1:]))

    @function('squeeze')
    def f_squeeze(self, input, dim=None):
        return Vs.squeeze(input, dim)

    @function('unsqueeze')
    def f_unsqueeze(self, input, dim):
        return Vs.unsqueeze(input, dim)

    @function('transpose')
    def f_transpose(self, input, dim0, dim1):
        return Vs.transpose(input, dim0, dim1)

    @function('t')
    def f_t(self, input):
        if input.ndim < 2:
            return input
        return Vs.transpose(input, 0, 1)

    @function('adjoint')
    def f_adjoint(self, input):
        return Vs.transpose(input, -2, -1)

    @method('permute')
    def t_permute(self, x, *dims):
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        return Vs.permute(x, dims)

    @function('permute')
    def f_permute(self, input, dims):
        return Vs.permute(input, dims)

    @function('movedim')
    def f_movedim(self, input, source, destination):
        src = [source] if isinstance(source, int) else list(source)
        dst = [destination] if isinstance(destination, int) else list(destination)
        nd = input.ndim
        src = [norm_dim(s, nd) for s in src]
        dst = [norm_dim(s, nd) for s in dst]
        order = [None] * nd
        for s, d in zip(src, dst):
            order[d] = s
        rest = iter([d for d in range(nd) if d not in src])
        order = [o if o is not None else next(rest) for o in order]
        return Vs.permute(input, order)

    @method('expand')
    def t_expand(self, x, *sizes):
        import torch

        if len(sizes) == 1 and isinstance(sizes[0], (tuple, list, torch.Size)):
            sizes = tuple(sizes[0])
        return Vs.expand(x, sizes)

    @function('broadcast_to')
    def f_broadcast_to(self, input, size):
        return Vs.expand(input, size)

    @method('expand_as')
    def t_expand_as(self, x, other):
        return Vs.expand(x, other.shape)

    @method('repeat')
    def t_repeat(self, x, *sizes):
        if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
            sizes = tuple(sizes[0])
        sizes = [int(s) for s in sizes]
        if len(sizes) < x.ndim:
            raise ValueError("repeat needs at least as many sizes as dimensions")
        off = len(sizes) - x.ndim
        base_shape = [1] * off + list(x.shape)
        shape = [b * r for b, r in zip(base_shape, sizes)]

        def fn(idx):
            out = []
            for j, s in enumerate(x.shape):
                e = idx[off + j]
                out.append(B.const(0) if s == 1 else B.imod(e, s))
            return out

        return View(x, shape, fn)

    @function('flip')
    def f_flip(self, input, dims):
        dims = [norm_dim(d, input.ndim) for d in ([dims] if isinstance(dims, int) else dims)]

        def fn(idx):
            return [B.isub(B.const(input.shape[d] - 1), e) if d in dims else e for d, e in enumerate(idx)]

        return View(input, input.shape, fn)

    @function('roll')
    def f_roll(self, input, shifts, dims=None):
        if dims is None:
            flat = Vs.flatten(input)
            return Vs.reshape(self.f_roll(flat, shifts, 0), input.shape)
        shifts = [shifts] if isinstance(shifts, int) else list(shifts)
        dims = [dims] if isinstance(dims, int) else list(dims)
        sh = {norm_dim(d, input.ndim): s for d, s in zip(dims, shifts)}

        def fn(idx):
            out = []
            for d, e in enumerate(idx):
                if d in sh and sh[d] % input.shape[d]:
                    n = input.shape[d]
                    out.append(B.imod(B.iadd(e, B.const(n - sh[d] % n)), n))
                else:
                    out.append(e)
            return out

        return View(input, input.shape, fn)

    @function('narrow')
    def f_narrow(self, input, dim, start, length):
        return Vs.slice_dim(input, dim, start, start + length)

    @function('select')
    def f_select(self, input, dim, index):
        return Vs.select_index(input, dim, index)

    @function('getitem')
    def f_getitem(self, obj, item):
        if not isinstance(obj, Val):
            return obj[item]
        return self._tensor_index(obj, item)

    def _tensor_index(self, x: Val, item):
        if not isinstance(item, tuple):
            item = (item,)
        if any(isinstance(it, Val) for it in item):
            raise UnsupportedOpError("indexing a tensor with a tensor (advanced/boolean indexing) is not supported")
        n_real = sum(1 for it in item if it is not None and it is not Ellipsis)
        if Ellipsis in item:
            k = item.index(Ellipsis)
            item = item[:k] + (slice(None),) * (x.ndim - n_real) + item[k + 1:]
        v = x
        d = 0  # current dimension of v
        for it in item:
            if it is None:
                v = Vs.unsqueeze(v, d)
                d += 1
            elif isinstance(it, slice):
                v = Vs.slice_dim(v, d, it.start, it.stop, it.step or 1)
                d += 1
            elif isinstance(it, int):
                v = Vs.select_index(v, d, it)
            else:
                raise UnsupportedOpError(f"unsupported index {it!r}")
        return v

    @function('split')
    def f_split(self, tensor, split_size_or_sections, dim=0):
        d = norm_dim(dim, tensor.ndim)
        n = tensor.shape[d]
        if isinstance(split_size_or_sections, int):
            s = split_size_or_sections
            sizes = [min(s, n - k) for k in range(0, n, s)]
        else:
            sizes = list(split_size_or_sections)
        out, start = [], 0
        for s in sizes:
            out.append(Vs.slice_dim(tensor, d, start, start + s))
            start += s
        return tuple(out)

    t_split = method('split')(f_split)

    @function('chunk')
    def f_chunk(self, input, chunks, dim=0):
        d = norm_dim(dim, input.ndim)
        n = input.shape[d]
        s = -(-n // chunks)
        return self.f_split(input, s, d)

    @function('unbind')
    def f_unbind(self, input, dim=0):
        d = norm_dim(dim, input.ndim)
        return tuple(Vs.select_index(input, d, i) for i in range(input.shape[d]))

    @function('diagonal')
    def f_diagonal(self, input, offset=0, dim1=0, dim2=1):
        if input.ndim != 2 or (dim1, dim2) not in ((0, 1), (-2, -1)):
            raise UnsupportedOpError("diagonal is supported for 2-d tensors only")
        n, m = input.shape
        length = max(0, min(n - max(0, -offset), m - max(0, offset)))
        return View(input, [length], lambda idx: [B.iadd(idx[0], B.const(max(0, -offset))),
                                                  B.iadd(idx[0], B.const(max(0, offset)))])

    @function('diag')
    def f_diag(self, input, diagonal=0):
        if input.ndim == 2:
            return self.f_diagonal(input, diagonal)
        if input.ndim != 1:
            raise UnsupportedOpError("diag of a tensor with more than 2 dimensions")
        n = input.shape[0] + abs(diagonal)
        k = diagonal

        def fn(i, j):
            return B.select(B.cmp("==", B.isub(j, i), B.const(k)),
                            input.at([i if k >= 0 else j]), B.fconst(0.0))

        name = self.b.assign(self.imp.hint, (n, n), lambda idx: fn(*idx), input.dtype)
        return TensorRef(name, (n, n), input.dtype)

    @function('diag_embed')
    def f_diag_embed(self, input, offset=0, dim1=-2, dim2=-1):
        if offset != 0 or (dim1, dim2) != (-2, -1):
            raise UnsupportedOpError("diag_embed with offset/dims")
        n = input.shape[-1]
        shape = tuple(input.shape) + (n,)
        name = self.b.assign(self.imp.hint, shape, lambda idx: B.select(
            B.cmp("==", idx[-2], idx[-1]), input.at(idx[:-1]), B.fconst(0.0)), input.dtype)
        return TensorRef(name, shape, input.dtype)

    # ------------------------------------------------------------------
    # creation

    def _const_like(self, input, value, dtype=None):
        dt = leir_dtype(dtype) if dtype is not None else input.dtype
        return ConstVal(value, input.shape, dt)

    @function('zeros_like')
    def f_zeros_like(self, input, dtype=None, **kw):
        return self._const_like(input, 0, dtype)

    @function('ones_like')
    def f_ones_like(self, input, dtype=None, **kw):
        return self._const_like(input, 1, dtype)

    @function('full_like')
    def f_full_like(self, input, fill_value, dtype=None, **kw):
        return self._const_like(input, fill_value, dtype)

    def _const_new(self, size, value, dtype=None):
        import torch

        if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
            size = tuple(size[0])
        return ConstVal(value, tuple(int(s) for s in size), self.imp.out_dtype())

    @function('zeros')
    def f_zeros(self, *size, **kw):
        return self._const_new(size, 0)

    @function('ones')
    def f_ones(self, *size, **kw):
        return self._const_new(size, 1)

    @function('full')
    def f_full(self, size, fill_value, **kw):
        return self._const_new((size,), fill_value)

    @method('new_zeros')
    def t_new_zeros(self, x, *size, **kw):
        return self._const_new(size, 0)

    @method('new_ones')
    def t_new_ones(self, x, *size, **kw):
        return self._const_new(size, 1)

    @method('new_full')
    def t_new_full(self, x, size, fill_value, **kw):
        return self._const_new((size,), fill_value)

    @function('tensor')
    def f_tensor(self, data, dtype=None, **kw):
        if isinstance(data, (int, float, bool)):
            return ConstVal(data, (), self.imp.out_dtype())
        raise UnsupportedOpError("torch.tensor(...) of a non-scalar inside forward")

    f_scalar_tensor = function('scalar_tensor')(f_tensor)
    f_as_tensor = function('as_tensor')(f_tensor)

    @function('arange')
    def f_arange(self, *args, **kw):
        vals = [a for a in args]
        if len(vals) == 1:
            start, end, step = 0, vals[0], 1
        elif len(vals) == 2:
            start, end, step = vals[0], vals[1], 1
        else:
            start, end, step = vals[:3]
        n = max(0, math.ceil((end - start) / step))
        dt = self.imp.out_dtype()

        def fn(idx):
            i = idx[0] if n > 1 else B.const(0)
            e = B.iadd(B.imul(i, int(step)), B.const(int(start))) if all(
                isinstance(v, int) for v in (start, step)) else B.add(B.mul(i, B.fconst(step)), B.fconst(start))
            return e

        return ExprVal((n,), fn, dt)

    # ------------------------------------------------------------------
    # concatenation

    @function('cat')
    def f_cat(self, tensors, dim=0):
        tensors = [t for t in tensors if not (isinstance(t, Val) and t.ndim == 1 and t.shape[0] == 0)]
        if len(tensors) == 1:
            return tensors[0]
        d = norm_dim(dim, tensors[0].ndim)
        sizes = [t.shape[d] for t in tensors]
        shape = list(tensors[0].shape)
        shape[d] = sum(sizes)
        dt = self.imp.out_dtype()

        def fn(idx):
            i = idx[d]
            offs = [0]
            for s in sizes:
                offs.append(offs[-1] + s)

            def piece(k):
                sub = list(idx)
                sub[d] = B.isub(i, B.const(offs[k]))
                return tensors[k].at(sub)

            e = piece(len(tensors) - 1)
            for k in range(len(tensors) - 2, -1, -1):
                e = B.select(B.cmp("<", i, B.const(offs[k + 1])), piece(k), e)
            return e

        name = self.b.assign(self.imp.hint, shape, fn, dt)
        return TensorRef(name, shape, dt)

    @function('stack')
    def f_stack(self, tensors, dim=0):
        d = norm_dim(dim, tensors[0].ndim + 1)
        return self.f_cat([Vs.unsqueeze(t, d) for t in tensors], d)

    @function('hstack')
    def f_hstack(self, tensors):
        return self.f_cat(tensors, 0 if tensors[0].ndim == 1 else 1)

    @function('vstack')
    def f_vstack(self, tensors):
        return self.f_cat([t if t.ndim > 1 else Vs.unsqueeze(t, 0) for t in tensors], 0)
