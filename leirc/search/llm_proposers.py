"""The LLM proposers: a model on an OpenAI-compatible endpoint proposes the next steps.

Three ways of asking (``LLMConfig.mode``), one proposer interface
(:class:`leirc.search.proposers.Proposer`, ``name = "llm"``):

* :class:`StepTPProposer` (``steptp``) -- Step-TP's single step: one call per expansion
  shows the program, its interface, the applicable strategies with their argument domains
  and the steps so far with their measured effect, and asks for up to ``k`` ranked steps;
* :class:`AutocompProposer` (``autocomp``) -- Autocomp's two phases: a plan call (current
  program, latency and hardware feedback, a menu of strategies after seeded dropout, the
  iteration number) then an implement call (the plan plus in-context examples of real
  strategy steps); the ensemble's models share the calls (``LLMClient.pick_model``);
* :class:`HTAMLLMProposer` (``htam``) -- HTAM: the memory picks the direction with its
  policy (exactly as :class:`~leirc.search.proposers.HTAMProposer`), the model ranks that
  direction's steps; the search updates the memory from the verified outcome.

A model's answer is untrusted. A named step is applied through the engine
(``Program.apply``); a transformed program becomes ``program_rewrite(leir=...)`` and is
applied the same way, so the search's trace replays without the model, and every candidate
is verified against the original like any other. Every refused answer is counted by reason
(:mod:`leirc.llm.parse` lists them) and logged on one line (never the prompt, never the key);
nothing a model says makes ``propose`` raise, and an endpoint failure (``llm_error:<kind>``)
leaves the proposer with what it has, possibly nothing, while the search goes on.

:func:`llm_suggest` is the one-call version for ``leirc suggest`` and the editor.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Callable, Optional

from ..llm.reask import answer_check
from ..llm.parse import Answer, Rejected, parse_answer, parse_answers
from ..llm.prompts import (PROGRAM_STRATEGY, TEMPLATE_VERSION, autocomp_implement_messages, autocomp_plan_messages,
                           docstring_example, htam_rank_messages, site_entries, steptp_messages, template_id)
from ..strategies import NotApplicable, Step, StrategyBug, get
from ..strategies.program import rejection_code  # (importing it registers program_rewrite)
from . import cost as C
from .directions import DIRECTION_DOC, direction_of, undoes
from .proposers import MenuProposer, Proposal, model_evidence
from .suggest import Suggestion

#: answers asked for per Step-TP call (the search asks for more when it has tried some)
MAX_ANSWERS = 8
#: Autocomp: plans per expansion, and the menu keep probability when the search's own
#: ``keep`` is 1 (no dropout): Autocomp's diversity comes from dropout
PLANS_PER_EXPANSION = 2
AUTOCOMP_KEEP = 0.5
#: HTAM: candidates of the chosen direction shown to the model
HTAM_CANDIDATES = 10
#: failed attempts per node shown in the next prompt
TRIED_SHOWN = 8

_ARGUMENT_ERRORS = ("argument '", "unknown argument", "missing argument")


class _Tally:
    """Counts of one proposer: answers, proposals, refusals by reason, verification."""

    def __init__(self):
        self.proposed = 0
        self.accepted = 0
        self.verified = 0
        self.rejected: Counter = Counter()
        self.failed_evaluations: Counter = Counter()

    def to_json(self) -> dict:
        return {"proposed": self.proposed, "accepted": self.accepted, "verified": self.verified,
                "rejected": dict(sorted(self.rejected.items())),
                "failed_evaluations": dict(sorted(self.failed_evaluations.items()))}


def classify(error: NotApplicable) -> str:
    """The reason code of a step the engine refused."""
    code = rejection_code(error)
    if code is not None:
        return code
    reason = getattr(error, "reason", str(error))
    if any(reason.startswith(p) for p in _ARGUMENT_ERRORS):
        return "illegal_arguments"
    return "not_applicable"


def node_history(node) -> list[dict]:
    """The steps from the root to ``node`` with their measured effect (for the prompts)."""
    path = []
    n = node
    while n is not None and getattr(n, "parent", None) is not None:
        path.append(n)
        n = n.parent
    root_ms = getattr(n, "ms", None) if n is not None else None
    out = []
    for m in reversed(path):
        h = {"step": m.step}
        ms = getattr(m, "ms", None)
        base = getattr(m, "base", None)
        if ms:
            h["ms"] = ms
            if base is not None and getattr(base, "ms", None):
                h["effect"] = base.ms / ms
            if root_ms:
                h["speedup"] = root_ms / ms
        elif getattr(m, "evaluation", None) is None:
            h["outcome"] = "not timed alone (part of a multi-step candidate)"
        out.append(h)
    return out


class _LLMProposer:
    """What the three modes share: the client, the engine door for answers, the tally."""

    name = "llm"
    mode = ""
    mode_template = "steptp"  # the template whose version a proposal's rationale names

    def __init__(self, client, menu: MenuProposer, *, target: str = "llvm", threads: Optional[int] = None,
                 log: Optional[Callable[[str], None]] = None):
        self.client = client
        self.menu = menu
        self.target = target
        self.threads = threads
        self.log = log or (lambda msg: None)
        self.tally = _Tally()
        # (parent fingerprint, last step) of every proposal made here: observe() knows its own
        self._mine: set = set()
        self._failed: dict[str, list] = {}  # parent fingerprint -> [(step, why)] for the next prompt

    # -- the allowed strategies ----------------------------------------------------------
    @property
    def names(self) -> list[str]:
        """The strategies a listing shows: the menu's (target, --strategies, approximate or
        not), without ``program_rewrite`` (a transformed program is an answer form, not a
        listed strategy)."""
        return [n for n in self.menu.names if n != PROGRAM_STRATEGY]

    @property
    def programs_allowed(self) -> bool:
        """Whether a whole program from the model may become a candidate: only with
        ``--allow-approximate`` (the menu then lists approximate strategies, program_rewrite
        among them). Nothing about such a program is proven; verification is its only
        evidence, so the search accepts it only when told that tested steps are welcome."""
        return PROGRAM_STRATEGY in self.menu.names

    # -- refusals -------------------------------------------------------------------------
    def reject(self, reason: str, detail: str = "", model: str = "") -> None:
        self.tally.rejected[reason] += 1
        first = str(detail).splitlines()[0][:200] if detail else ""
        self.log(f"llm[{self.mode}]{' ' + model if model else ''}: rejected ({reason}){': ' + first if first else ''}")

    def llm_failed(self, e) -> None:
        self.reject(f"llm_error:{getattr(e, 'kind', 'unknown')}", str(e))

    # -- answers -> proposals -------------------------------------------------------------
    def steps_of(self, ans: Answer) -> list[tuple]:
        """The step sequences an answer offers, preferred first: its named steps, then its
        program text (Step-TP's record answer carries both)."""
        out = []
        if ans.steps:
            out.append(tuple(ans.steps))
        if ans.program_text is not None:
            out.append((Step.make(PROGRAM_STRATEGY, leir=ans.program_text),))
        return out

    def apply_steps(self, node, steps: tuple):
        """The child Program of ``steps`` on the node, or raises Rejected."""
        program = node.program
        last = node.step.name if getattr(node, "step", None) is not None else None
        allowed = set(self.names) | ({PROGRAM_STRATEGY} if self.programs_allowed else set())
        for st in steps:
            try:
                get(st.name)
            except KeyError:
                raise Rejected("unknown_strategy", f"no strategy named '{st.name}'") from None
            if st.name == PROGRAM_STRATEGY and st.name not in allowed:
                raise Rejected("approximate_not_allowed",
                               "a whole program from the model is only tested, never proven: the search accepts "
                               "model-written programs with --allow-approximate")
            if st.name not in allowed:
                raise Rejected("not_allowed", f"{st.name} is not among this search's strategies")
            if undoes(last, st.name):
                raise Rejected("undoes_previous", f"{st.name} right after {last} undoes it")
            try:
                program = program.apply(st).program
            except NotApplicable as e:
                raise Rejected(classify(e), str(e)) from None
            except StrategyBug as e:  # a bug in leirc, not in the answer: said, counted, skipped
                raise Rejected("strategy_bug", str(e)) from None
            last = st.name
        if program.fingerprint == node.program.fingerprint:
            raise Rejected("no_change", "the steps leave the program unchanged")
        return program

    def proposal(self, node, ans: Answer, model: str, *, seen: set, prefix: str = "") -> Optional[Proposal]:
        """The answer as a Proposal, or None (the refusal counted)."""
        self.tally.proposed += 1
        error: Optional[Rejected] = None
        for steps in self.steps_of(ans):
            try:
                child = self.apply_steps(node, steps)
            except Rejected as e:
                error = error or e
                continue
            if steps in seen:
                self.reject("duplicate", str(steps[0]), model)
                return None
            seen.add(steps)
            self.tally.accepted += 1
            self._mine.add((node.program.fingerprint, steps[-1]))
            base, est = self.menu.estimate(node.program), self.menu.estimate(child)
            prior = base.seconds / est.seconds if est.seconds > 0 else 1.0
            why = f"LLM {model} ({template_id(self.mode_template)}): {prefix}{ans.rationale or 'no rationale given'}"
            return Proposal(steps[0], prior, why, direction_of(steps[0].name), f"llm:{model}", tuple(steps[1:]))
        error = error or Rejected("bad_shape", f"a {ans.kind} answer is not a step or a program")
        self.reject(error.reason, error.detail, model)
        offered = self.steps_of(ans)
        if offered:  # shown in the next prompt at this node (MCTS and BFS expand a node again)
            self._failed.setdefault(node.program.fingerprint, []).append((offered[0][0], f"refused: {error.reason}"))
        return None

    def tried(self, node) -> list:
        return list(self._failed.get(node.program.fingerprint, ()))[-TRIED_SHOWN:]

    # -- the search's feedback ------------------------------------------------------------
    def observe(self, node, step, evaluation) -> None:
        """Counts how the model's own proposals fared (``verify_failed`` for a candidate
        that did not verify, build or run) and remembers failures for the next prompt."""
        key = (node.program.fingerprint, step)
        if key not in self._mine or evaluation is None:
            return
        self._mine.discard(key)
        if evaluation.ok:
            self.tally.verified += 1
            return
        kind = evaluation.error_kind or "failed"
        self.tally.failed_evaluations[kind] += 1
        self.reject("verify_failed", f"{step}: {kind}")
        self._failed.setdefault(node.program.fingerprint, []).append((step, f"failed: {kind}"))

    def stats(self) -> dict:
        u = self.client.usage
        return {"mode": self.mode, "template_version": TEMPLATE_VERSION, "calls": u.calls,
                "cached_calls": u.cached_calls, "failed_calls": u.failed_calls, "retries": u.retries,
                "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                # answers the client refused and asked again for (prose, malformed JSON, wrong shape)
                "reasks": u.reasks, "reask_refusals": dict(u.refusals),
                **self.tally.to_json(), "by_model": {m: dict(b) for m, b in u.by_model.items()}}

    def close(self) -> None:
        self.client.close()

    # -- helpers --------------------------------------------------------------------------
    def chat(self, messages, purpose: str, model: Optional[str] = None):
        """One call; None (counted) when the endpoint failed."""
        from ..llm import LLMError

        try:
            return self.client.chat(messages, model=model, purpose=purpose, check=answer_check(purpose))
        except LLMError as e:
            self.llm_failed(e)
            return None

    def many(self, requests: list) -> list:
        from ..llm import LLMError

        out = []
        for r in self.client.chat_many(requests, check_for=answer_check):
            if isinstance(r, LLMError):
                self.llm_failed(r)
                out.append(None)
            else:
                out.append(r)
        return out

    def answers(self, completion, k: int) -> list:
        """The answers of a completion (refusals counted); [] when there are none. More
        than asked for are read too (a few: the later ones fill in for refused ones)."""
        try:
            items = parse_answers(completion.text, limit=max(k, 2 * MAX_ANSWERS))
        except Rejected as e:
            reason = "too_long" if completion.truncated and e.reason in ("malformed_json", "no_json") else e.reason
            self.tally.proposed += 1
            self.reject(reason, e.detail, completion.model)
            return []
        out = []
        for it in items:
            if isinstance(it, Rejected):
                self.tally.proposed += 1
                self.reject(it.reason, it.detail, completion.model)
            else:
                out.append(it)
        return out


class StepTPProposer(_LLMProposer):
    """Step-TP single step: one call per expansion asks for up to ``k`` ranked steps."""

    mode = "steptp"
    mode_template = "steptp"

    def propose(self, node, k: int, rng) -> list[Proposal]:
        k = max(1, min(int(k), MAX_ANSWERS))
        msgs = steptp_messages(node.program, target=self.target, history=node_history(node), strategies=self.names,
                               k=k, tried=self.tried(node))
        done = self.chat(msgs, "steptp")
        if done is None:
            return []
        out, seen = [], set(getattr(node, "tried", ()) or ())
        for ans in self.answers(done, k):
            p = self.proposal(node, ans, done.model, seen=seen)
            if p is not None:
                out.append(p)
        return out[:k]


class AutocompProposer(_LLMProposer):
    """Autocomp: plan (one menu item, after seeded dropout) -> implement (steps or LEIR)."""

    mode = "autocomp"
    mode_template = "autocomp_implement"

    def __init__(self, client, menu: MenuProposer, *, keep: float = AUTOCOMP_KEEP, plans: int = PLANS_PER_EXPANSION,
                 max_depth: Optional[int] = None, **kw):
        super().__init__(client, menu, **kw)
        self.keep = float(keep)
        self.plans = max(1, int(plans))
        self.max_depth = max_depth

    def stats(self) -> dict:
        return {**super().stats(), "keep": self.keep, "plans_per_expansion": self.plans}

    def menu_options(self, program) -> list[dict]:
        """One option per allowed strategy that has a site here (Autocomp's menu is a list
        of optimizations, the plan says where)."""
        names = []
        for e in site_entries(program, self.names):
            if e["strategy"] not in names:
                names.append(e["strategy"])
        return [{"strategy": n, "description": f"{get(n).summary} [{direction_of(n)}]"} for n in names]

    def dropout(self, options: list, rng) -> list:
        """Each option kept with probability ``keep`` (one draw per option, in order); at
        least one is always kept."""
        if self.keep >= 1.0 or not options:
            return list(options)
        kept = [o for o in options if rng.random() < self.keep]
        return kept or [options[int(rng.random() * len(options)) % len(options)]]

    def feedback(self, node) -> dict:
        est = self.menu.estimate(node.program)
        fb = C.measured_feedback(est, getattr(node, "ms", None), self.target, threads=self.threads) or {}
        fb.setdefault("model_ms", est.seconds * 1e3)
        fb["moved_bytes"] = est.bytes
        k = node.program.kernel
        fb["footprint_bytes"] = sum(C.DTYPE_BYTES.get(p.dtype, 4) * math.prod(p.shape or (1,))
                                    for p in k.inputs + k.outputs)
        if est.stmts:
            heaviest = max(est.stmts, key=lambda s: s.seconds)
            fb["bound"] = f"{heaviest.bound} (the slowest statement, {heaviest.ref}, per the model)"
        return fb

    def chosen(self, ans: Optional[Answer], menu: list) -> Optional[str]:
        """The strategy a plan chose: its menu number, else a menu strategy it names."""
        if ans is None:
            return None
        if ans.option is not None and 1 <= ans.option <= len(menu):
            return menu[ans.option - 1]["strategy"]
        for o in menu:
            if re.search(rf"\b{re.escape(o['strategy'])}\b", ans.plan):
                return o["strategy"]
        return None

    def propose(self, node, k: int, rng) -> list[Proposal]:
        options = self.menu_options(node.program)
        if not options:
            return []
        n = max(1, min(int(k), self.plans))
        menus = [self.dropout(options, rng) for _ in range(n)]  # each plan its own menu
        feedback = self.feedback(node)
        iteration = len(getattr(node, "steps", ()) or ()) + 1
        plan_msgs = [autocomp_plan_messages(node.program, target=self.target, feedback=feedback, menu=m,
                                            iteration=iteration, iterations=self.max_depth) for m in menus]
        plans = self.many([(m, None, "autocomp_plan") for m in plan_msgs])
        jobs = []
        for menu, done in zip(menus, plans):
            if done is None:
                continue
            try:
                ans = parse_answer(done.text)
            except Rejected as e:
                self.tally.proposed += 1
                self.reject(e.reason, f"plan: {e.detail}", done.model)
                continue
            if ans.kind != "plan":
                if ans.kind in ("step", "program"):  # the model skipped ahead: take it as the implementation
                    jobs.append((None, ans, done.model))
                    continue
                self.tally.proposed += 1
                self.reject("bad_shape", f"plan: a {ans.kind} answer", done.model)
                continue
            name = self.chosen(ans, menu)
            examples = [ex for ex in (docstring_example(name) if name else None,) if ex is not None]
            others = [o["strategy"] for o in menu if o["strategy"] != name]
            if others and len(examples) < 2:
                ex = docstring_example(others[0])
                if ex is not None:
                    examples.append(ex)
            plan = ans.plan + (f"\n(menu option: {name})" if name else "")
            msgs = autocomp_implement_messages(node.program, target=self.target, plan=plan, examples=examples,
                                               strategies=[name] if name else self.names)
            jobs.append((msgs, ans, done.model))
        to_call = [(m, None, "autocomp_implement") for m, _, _ in jobs if m is not None]
        results = iter(self.many(to_call))
        out, seen = [], set(getattr(node, "tried", ()) or ())
        for msgs, plan_ans, plan_model in jobs:
            if msgs is None:  # an implementation that came with the plan
                p = self.proposal(node, plan_ans, plan_model, seen=seen)
                if p is not None:
                    out.append(p)
                continue
            done = next(results)
            if done is None:
                continue
            for ans in self.answers(done, 1):
                if ans.kind == "plan":
                    self.tally.proposed += 1
                    self.reject("bad_shape", "implement: another plan instead of steps", done.model)
                    continue
                p = self.proposal(node, ans, done.model, seen=seen, prefix=f"plan ({plan_model}): {plan_ans.plan} -> ")
                if p is not None:
                    out.append(p)
        return out[:k]


class HTAMLLMProposer(_LLMProposer):
    """HTAM + LLM: the memory's policy picks the direction, the model ranks its steps."""

    mode = "htam"
    mode_template = "htam_rank"

    def __init__(self, client, menu: MenuProposer, memory, *, temperature: float = 0.5, **kw):
        super().__init__(client, menu, **kw)
        self.memory = memory
        self.temperature = float(temperature)

    def propose(self, node, k: int, rng) -> list[Proposal]:
        items = [m for m in self.menu.menu(node.program) if self.menu.allowed(node, m)]
        by_dir: dict = {}
        for m in items:
            by_dir.setdefault(m.direction, []).append(m)
        if not by_dir:
            return []
        prefix = list(node.directions)
        evidence = model_evidence(by_dir)
        pol = self.memory.policy(prefix, self.temperature, allowed=sorted(by_dir), evidence=evidence)
        d = self.memory.choose_direction(prefix, rng, self.temperature, allowed=sorted(by_dir), evidence=evidence)
        # the memory's own order within the direction (HTAMProposer's), which the model re-ranks
        def order_key(m):
            return -(math.log(max(m.prior, 1e-9)) + self.memory.strategy_score(m.step.name)), str(m.step)

        ranked = sorted(by_dir[d], key=order_key)[:HTAM_CANDIDATES]
        after = prefix[-1] if prefix else "the start"
        head = f"HTAM: direction {d} (p={pol.get(d, 0):.2f} after {after})"
        cands = [{"step": m.step if not m.then else " then ".join(str(s) for s in (m.step,) + tuple(m.then)),
                  "predicted": m.prior} for m in ranked]
        msgs = htam_rank_messages(node.program, target=self.target, direction=d, direction_doc=DIRECTION_DOC.get(d, ""),
                                  candidates=cands, history=node_history(node))
        done = self.chat(msgs, "htam_rank")
        order, notes, model = [], {}, ""
        if done is not None:
            model = done.model
            self.tally.proposed += 1
            try:
                ans = parse_answer(done.text)
                if ans.kind != "ranking":
                    raise Rejected("bad_shape", f"a {ans.kind} answer instead of a ranking")
                bad = [r for r in ans.ranking if not 1 <= r <= len(ranked)]
                if bad:
                    self.reject("bad_ranking", f"numbers {bad} are not listed (1..{len(ranked)})", model)
                for r in ans.ranking:
                    if 1 <= r <= len(ranked) and r - 1 not in order:
                        order.append(r - 1)
                notes = ans.notes
                if order:
                    self.tally.accepted += 1
            except Rejected as e:
                self.reject(e.reason, e.detail, model)
        out = []
        for i in order:  # the model's ranking first, then the memory's order for the rest
            m = ranked[i]
            why = f"{head}; ranked {len(out) + 1} by LLM {model} ({template_id('htam_rank')})"
            if notes.get(i + 1):
                why += f": {notes[i + 1]}"
            out.append(Proposal(m.step, m.prior, why, m.direction, f"llm:{model}", m.then))
            self._mine.add((node.program.fingerprint, (m.then or (m.step,))[-1]))
        for i, m in enumerate(ranked):
            if i not in order:
                why = f"{head}; not ranked by the LLM; {self.menu.rationale(node.program, m)}"
                out.append(Proposal(m.step, m.prior, why, m.direction, "htam", m.then))
        return out[:k]


def build_llm_proposer(options, memory, menu: MenuProposer, *, log=None, client=None):
    """The LLM proposer ``options.llm`` (a :class:`leirc.llm.LLMConfig`) describes; its
    ``mode`` picks the class. ``client`` replaces the one made from the config (tests)."""
    cfg = options.llm
    if cfg is None:
        from .core import SearchError

        raise SearchError("the llm proposer needs an endpoint: --llm-base-url URL --llm-model M (or --llm-config FILE)")
    if client is None:
        from ..llm import LLMClient, LLMError

        try:
            client = LLMClient(cfg, log=log)
        except LLMError as e:
            from .core import SearchError

            raise SearchError(f"the llm proposer cannot start: {e}") from None
    kw = dict(target=options.target, threads=options.threads, log=log)
    mode = getattr(cfg, "mode", "steptp")
    if mode == "autocomp":
        keep = options.keep if options.keep < 1.0 else AUTOCOMP_KEEP
        return AutocompProposer(client, menu, keep=keep, max_depth=options.max_depth, **kw)
    if mode == "htam":
        return HTAMLLMProposer(client, menu, memory, temperature=options.temperature, **kw)
    return StepTPProposer(client, menu, **kw)


class LLMSuggestions(list):
    """The suggestions, plus ``stats``: calls, answers, refusals by reason (and ``error``
    when the endpoint failed)."""

    stats: dict


def llm_suggest(program, client, *, k: int = 5, target: str = "llvm", history=(), memory=None,
                strategies=None, log=None) -> LLMSuggestions:
    """Up to ``k`` next steps for ``program`` from one Step-TP-style call, best first. Every
    answer is applied through the engine (so each suggestion is legal); refused ones are
    dropped and counted in ``.stats``. The score is the model's rank (1, 1/2, 1/3, ...).
    Never raises for what the model or the endpoint does."""
    from ..llm import LLMError

    prop = StepTPProposer(client, MenuProposer(target, strategies=strategies), target=target, log=log)
    k = max(1, min(int(k), MAX_ANSWERS))
    out = LLMSuggestions()
    msgs = steptp_messages(program, target=target, history=history, strategies=prop.names, k=k)
    try:
        done = client.chat(msgs, purpose="suggest")
    except LLMError as e:
        prop.llm_failed(e)
        out.stats = {"mode": "suggest", **prop.tally.to_json(), "error": str(e), "template_version": TEMPLATE_VERSION}
        return out
    node, seen = _Root(program), set()
    for ans in prop.answers(done, k):
        if len(ans.steps) > 1:  # a suggestion is one step an editor applies
            prop.tally.proposed += 1
            prop.reject("multi_step", f"{len(ans.steps)} steps in one answer", done.model)
            continue
        p = prop.proposal(node, ans, done.model, seen=seen)
        if p is None:
            continue
        why = f"LLM ({done.model}): {ans.rationale or 'no rationale given'}"
        if memory is not None:
            why += f"; memory: {p.step.name} {memory.strategy_score(p.step.name):+.3f}"
        out.append(Suggestion(p.step, 1.0 / (1 + len(out)), why, p.direction, p.prior))
    del out[k:]
    out.stats = {"mode": "suggest", **prop.tally.to_json(), "model": done.model, "cached": done.cached,
                 "prompt_tokens": done.prompt_tokens, "completion_tokens": done.completion_tokens,
                 "template_version": TEMPLATE_VERSION}
    return out


class _Root:
    """A search-node stand-in for a program with no history (``llm_suggest``)."""

    def __init__(self, program):
        self.program = program
        self.parent = None
        self.step = None
        self.steps = ()
        self.directions = ()
        self.tried = set()


__all__ = ["AutocompProposer", "HTAMLLMProposer", "LLMSuggestions", "StepTPProposer", "build_llm_proposer",
           "classify", "llm_suggest", "node_history"]
