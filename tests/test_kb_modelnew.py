"""The ModelNew that `leirc build MODEL.py` writes copies nothing per call (issue #35): the
kernel reads the input tensors and the parameters in place (DLPack views), writes the
tensor that forward returns, and binds the parameters once. `Library.run` takes NumPy
arrays the same way."""

from __future__ import annotations

import importlib.util
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

MODEL = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self, n_in, n_out):
            super().__init__()
            self.lin = nn.Linear(n_in, n_out)

        def forward(self, x):
            return torch.relu(self.lin(x))

    def get_inputs():
        return [torch.rand(8, 16)]

    def get_init_inputs():
        return [16, 12]
''')


@pytest.fixture(scope="module")
def solution(tmp_path_factory):
    """The generated ModelNew module, built once by the CLI (the path a user takes)."""
    from leirc.cli.main import main

    d = tmp_path_factory.mktemp("kbm")
    (d / "lin_model.py").write_text(MODEL)
    rc = main(["build", str(d / "lin_model.py"), "-o", str(d / "out"), "--no-verify"])
    assert rc == 0
    spec = importlib.util.spec_from_file_location("lin_model_leirc_zero_copy", d / "out" / "lin_model_leirc.py")
    sol = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = sol
    spec.loader.exec_module(sol)
    return sol


def _models(sol):
    torch.manual_seed(42)
    ref = sol._ref.Model(*sol.get_init_inputs())
    torch.manual_seed(42)
    new = sol.ModelNew(*sol.get_init_inputs())
    return ref, new


class _Spy:
    """Stands in for the kernel function: records the data pointers it is called with."""

    def __init__(self, fn):
        self.fn, self.calls = fn, []

    def __call__(self, *args):
        self.calls.append([a.data_ptr() for a in args])
        return self.fn(*args)


def test_forward_passes_views_and_returns_the_tensor_the_kernel_wrote(solution):
    ref, new = _models(solution)
    lib = solution._built()
    spy = _Spy(lib.function)
    lib.function = spy
    try:
        x = torch.rand(8, 16)
        with torch.no_grad():
            y = new(x)
            want = ref(x)
    finally:
        lib.function = spy.fn
    assert torch.allclose(y, want, rtol=1e-5, atol=1e-6)
    (ptrs,) = spy.calls
    names = [p.name for p in lib.kernel.inputs] + [p.name for p in lib.kernel.outputs]
    by_name = dict(zip(names, ptrs))
    call = new._leirc
    # the runtime input and every parameter are the tensors' own storage
    assert by_name[call.runtime[0]] == x.data_ptr()
    for name, qual in call.params.items():
        obj = new.ref
        for part in qual.split("."):
            obj = getattr(obj, part)
        assert by_name[name] == obj.data_ptr(), qual
    # the output the kernel wrote is the tensor forward returned
    assert by_name[lib.kernel.outputs[0].name] == y.data_ptr()


def test_an_input_is_read_in_place_and_each_call_gets_a_fresh_output(solution):
    ref, new = _models(solution)
    x = torch.rand(8, 16)
    with torch.no_grad():
        y1 = new(x).clone()
        x.mul_(-1.0).add_(0.5)  # changed in place: the same storage, new values
        y2 = new(x)
        y3 = new(x)
        assert torch.allclose(y2, ref(x), rtol=1e-5, atol=1e-6)
    assert not torch.equal(y1, y2)
    assert y2.data_ptr() != y3.data_ptr()  # fresh outputs, as Model allocates its own


def test_parameters_are_bound_once_and_follow_in_place_updates(solution):
    ref, new = _models(solution)
    x = torch.rand(8, 16)
    with torch.no_grad():
        for _ in range(3):
            new(x)
        call = new._leirc
        n_params = len(call.params)
        assert n_params == 2 and call.binds == n_params  # bound on the first call only
        # an in-place update (load_state_dict, an optimizer step) is seen through the view
        for m in (ref, new.ref):
            m.lin.weight.mul_(0.5)
        assert torch.allclose(new(x), ref(x), rtol=1e-5, atol=1e-6)
        assert call.binds == n_params
        # a replaced parameter is bound again
        w = torch.nn.Parameter(torch.rand(12, 16))
        ref.lin.weight = w
        new.ref.lin.weight = torch.nn.Parameter(w.detach().clone())
        assert torch.allclose(new(x), ref(x), rtol=1e-5, atol=1e-6)
        assert call.binds == n_params + 1
        # new storage under the same Parameter object (Module.to assigns .data like this)
        data = torch.rand(12, 16)
        ref.lin.weight.data = data
        new.ref.lin.weight.data = data.clone()
        assert torch.allclose(new(x), ref(x), rtol=1e-5, atol=1e-6)
        assert call.binds == n_params + 2
        new.ref.double()  # float64 parameters: converted to the kernel's f32, once per change
        y = new(x)
        assert torch.allclose(y, ref(x), rtol=1e-5, atol=1e-6) and call.binds == n_params + 4
        new(x)
        assert call.binds == n_params + 4


def test_non_contiguous_and_other_dtype_inputs_are_converted_once(solution):
    ref, new = _models(solution)
    base = torch.rand(16, 8)
    with torch.no_grad():
        xt = base.t()  # not contiguous
        assert not xt.is_contiguous()
        assert torch.allclose(new(xt), ref(xt.contiguous()), rtol=1e-5, atol=1e-6)
        xd = torch.rand(8, 16, dtype=torch.float64)
        assert torch.allclose(new(xd), ref(xd.float()), rtol=1e-5, atol=1e-6)
        xo = torch.rand(8 * 16 + 1)[1:].view(8, 16)  # contiguous, but 4 bytes into its allocation
        assert xo.is_contiguous() and xo.data_ptr() % 64
        assert torch.allclose(new(xo), ref(xo), rtol=1e-5, atol=1e-6)


def test_library_run_reads_numpy_in_place_and_writes_the_given_output():
    from leirc.lang.checker import check_text
    from leirc.lower import build
    from leirc.lower.device import Library

    src = r"\kernel axpy(X: f32[64], Y: f32[64]) -> (Z: f32[64]) { L^{64}_{i=0} [ Z^{f32,g}_{i} = 2.0*X^{f32,g}_{i} + Y^{f32,g}_{i}; ]; }"
    lib = Library.from_built(build(check_text(src).results[0], "llvm"))
    rng = np.random.default_rng(0)
    x = rng.random(64, dtype=np.float32)
    y = rng.random(64, dtype=np.float32)
    y.flags.writeable = False  # read-only input (as cached references are): still no copy needed
    z = np.full(64, np.nan, np.float32)
    out = lib.run({"X": x, "Y": y}, {"Z": z})
    assert out["Z"] is z  # written in place
    np.testing.assert_allclose(z, 2 * x + y, rtol=1e-6)
    fresh = lib.run({"X": x.astype(np.float64), "Y": y})["Z"]  # another dtype: converted
    assert fresh.dtype == np.float32
    np.testing.assert_allclose(fresh, 2 * x + y, rtol=1e-6)
    shifted = np.concatenate([np.zeros(1, np.float32), x])[1:]  # not at TVM's 64-byte alignment
    np.testing.assert_allclose(lib.run({"X": shifted, "Y": y})["Z"], 2 * x + y, rtol=1e-6)
    with pytest.raises(KeyError, match="needs input 'Y'"):
        lib.run({"X": x})
