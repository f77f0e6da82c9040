"""Helpers of ``benchmarks/bench_peers.py``: TE versions of stdlib kernels for MetaSchedule,
MetaSchedule tuning/loading, PyTorch/NumPy references, the measured peaks."""
