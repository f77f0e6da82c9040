"""``leirc dataset merge``: the shards of one generation (``--shard i/n``) into one dataset.

Shards must have been generated with the same options except ``shard``; a job present in
two shards must agree on every stable field (:func:`leirc.dataset.store.stable`). Units are
never split across shards, so the merged set equals the unsharded run's.
"""

from __future__ import annotations

import json

from .store import Store, StoreError, stable


def merge(out_dir: str, shard_dirs: list[str]) -> dict:
    if not shard_dirs:
        raise StoreError("merge needs at least one shard directory")
    stores = [Store(d, create=False) for d in shard_dirs]
    opts = []
    for s in stores:
        o = s.meta().get("options")
        if o is None:
            raise StoreError(f"{s.directory}: no generation options recorded")
        opts.append(o)
    base = {k: v for k, v in opts[0].items() if k != "shard"}
    for s, o in zip(stores[1:], opts[1:]):
        other = {k: v for k, v in o.items() if k != "shard"}
        if other != base:
            diff = sorted(k for k in set(base) | set(other) if base.get(k) != other.get(k))
            raise StoreError(f"{s.directory} was generated with other options ({', '.join(diff)})")
    shards = sorted(tuple(o["shard"]) for o in opts)
    n = shards[0][1]
    merged_opts = dict(base, shard=[0, 1])
    out = Store(out_dir)
    out.claim(merged_opts)
    have = {}
    for r in out.records():
        have[r["job"]] = stable(r)
    added = 0
    for s in stores:
        for r in s.records():
            st = stable(r)
            if r["job"] in have:
                if have[r["job"]] != st:
                    raise StoreError(f"job {r['job']} differs between shards ({s.directory})")
                continue
            out.put(r)
            have[r["job"]] = st
            added += 1
    n_ok, n_bad = out.export_jsonl()
    complete = sorted(i for i, _ in shards) == list(range(n)) and all(m == n for _, m in shards)
    return {"shards": [list(x) for x in shards], "complete": complete, "added": added, "records": n_ok,
            "rejected": n_bad, "options": json.loads(json.dumps(merged_opts))}


__all__ = ["merge"]
