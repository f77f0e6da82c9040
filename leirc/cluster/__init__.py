"""Running many independent jobs at once: on local processes or a Ray cluster.

:mod:`.executor` has the :class:`Executor` protocol with :class:`LocalExecutor` (a process
pool on this machine) and :class:`RayExecutor` (``--cluster``; the optional extra
``leirc[cluster]``); :mod:`.hostid` the target fingerprint that decides where a timing may
run; :mod:`.progress` the live progress line; :mod:`.tune` the batch tuner (``leirc tune``).
Drivers stay the single writers of their stores: a task's value comes back, nothing is
written where it runs. docs/cluster.md.
"""

from .executor import (ClusterError, Executor, LocalExecutor, Outcome, RayExecutor, Task, job_key, open_executor,
                       ray_available)
from .hostid import node_resources, target_fingerprint, timer_resource
from .progress import Progress

__all__ = ["ClusterError", "Executor", "LocalExecutor", "Outcome", "RayExecutor", "Task", "job_key", "open_executor",
           "ray_available", "node_resources", "target_fingerprint", "timer_resource", "Progress"]
