"""Helpers of ``benchmarks/search_bench.py`` (issue #13's benchmark matrix): the metrics and
output (``metrics``), PyTorch eager versions of the stdlib kernels (``torch_eager``), and
MetaSchedule at a wall-clock budget (``ms_tune``)."""
