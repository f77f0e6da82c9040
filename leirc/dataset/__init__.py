"""Step-level (Step-TP) dataset generation: verified one-step LEIR transformations with a
structured reasoning trace grounded in the programs, for training kernel-optimizing models.

* :mod:`.sources` -- ``.leir`` files and KernelBench-format PyTorch modules (frontend);
* :mod:`.shapes` -- shape instances of a kernel (seeded, small enough for the literal oracle);
* :mod:`.generate` -- plan (units, jobs, shards) and run (``Program.apply`` + ``Evaluator``);
* :mod:`.store` -- the SQLite job table that makes a run resumable and shards mergeable;
* :mod:`.reasoning` -- precondition, IR changes, rationale, measured effect;
* :mod:`.trajectory` -- multi-step records: a saved trace replayed, every state verified and timed;
* :mod:`.filtering`, :mod:`.export`, :mod:`.prompt` -- balancing, chat/plain JSONL (one chat
  example per verified trajectory step), splits by source kernel;
* :mod:`.stats`, :mod:`.tokens` -- counts, rates, LEIR/TIR/CUDA token statistics, the plot.

Documentation: ``docs/dataset.md``. The CLI is ``leirc dataset`` (:mod:`leirc.cli.cmd_dataset`).
"""
