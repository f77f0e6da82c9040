"""``dataset gen`` timing on TVM's RPC tracker: a tracker and a server started here on
127.0.0.1 (free ports); records are verified locally and timed on the server, the original
and the candidate in one remote session; the device key is part of the dataset's options,
the tracker's address is not."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("tornado", reason="TVM's RPC tracker needs tornado (pip install tornado)")

from rpc_tracker import TrackerFailed, tracker_with_server  # noqa: E402 - after the skip

from leirc.dataset.generate import GenOptions, generate  # noqa: E402
from leirc.dataset.store import Store  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KEY = "leirc-dataset-test"

pytestmark = pytest.mark.slow  # a tracker, a server that registers with it, real builds


@pytest.fixture(scope="module")
def tracker(tmp_path_factory):
    try:
        with tracker_with_server(tmp_path_factory.mktemp("rpc"), KEY) as t:
            yield t
    except TrackerFailed as e:
        pytest.fail(str(e))


def test_records_are_verified_here_and_timed_on_the_rpc_server(tracker, tmp_path):
    opts = GenOptions(seed=0, shapes=1, per_strategy=1, strategies=("loop_split",), repeat=2,
                      compare_compiled=False, rpc=tracker["address"], rpc_key=KEY)
    out = tmp_path / "ds"
    summary = generate([str(ROOT / "stdlib" / "relu.leir")], str(out), opts, workers=0)
    assert summary["status"] == {"ok": summary["records"]} and summary["records"] >= 1 and summary["complete"]
    recs = list(Store(str(out), create=False).records("ok"))
    for r in recs:
        t = r["timing"]
        assert t["on"] == f"rpc://{tracker['address']}/{KEY}" and r["reasoning"]["measured"]["on"] == t["on"]
        assert t["original_ms"] > 0 and t["transformed_ms"] > 0 and not t.get("error")
        assert t["speedup"] == pytest.approx(t["original_ms"] / t["transformed_ms"], rel=1e-3)
        assert r["verification"]["ok"] and r["verification"]["equal"]
    # two kernels uploaded and loaded per timed record
    assert open(tracker["server_log"]).read().count("load_module") >= 2 * len(recs)
    meta = Store(str(out), create=False).meta()["options"]
    assert meta["rpc_key"] == KEY and "rpc" not in meta
    # the same dataset resumed through the tracker at another address is the same dataset
    again = GenOptions(**{**opts.__dict__, "rpc": "127.0.0.1:1"})
    assert generate([str(ROOT / "stdlib" / "relu.leir")], str(out), again, workers=0)["ran"] == {}


def test_rpc_options_are_checked():
    with pytest.raises(ValueError, match="device key"):
        GenOptions(rpc="127.0.0.1:9190")
    with pytest.raises(ValueError, match="HOST:PORT"):
        GenOptions(rpc="nowhere", rpc_key=KEY)
    with pytest.raises(ValueError, match="needs the tracker"):
        generate([str(ROOT / "stdlib" / "relu.leir")], "/nonexistent/never-created", GenOptions(rpc_key=KEY))
    assert "rpc_key" not in GenOptions().to_json()  # old datasets' options are unchanged
