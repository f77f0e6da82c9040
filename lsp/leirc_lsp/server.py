"""The language server: pygls handlers that convert positions and delegate to
:mod:`leirc.ide`.

Concurrency: nothing blocking runs in the event loop; messages are sent only from the
loop. Worker threads, each a queue of its own so that slow work never delays fast work:

* ``analysis``: parse + check (per kernel, cached), what every request needs first;
* ``actions``: code-action listing for the strategies that list fast, and resolving (the
  plan and its minimal edits);
* a worker *process* at a lower priority for the listing of the strategies that were slow
  lately (their results join the next list at that place; see :mod:`leirc.ide.assists`):
  it takes neither this process's GIL nor CPU time the requests need; work queued for a
  text that changed is dropped;
* ``suggest``: "Suggest optimization" (the search's ranking, or an LLM endpoint).

Diagnostics are pushed (debounced per document, dropped when the document changed while
they were computed) or, for a client that supports it, pulled (``textDocument/diagnostic``
with result ids, so an unchanged document costs nothing); ``diagnosticsMode`` chooses.
Builds and runs (inline verification, timing) run in a separate process per evaluation
(:mod:`leirc_lsp.evaluate`) under a timeout; a crash or hang there is reported on the
kernel's code lens, the server stays up. TVM is never imported in this process.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import hashlib
import itertools
import json
import logging
import os
import signal
import sys
import threading
import traceback
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Optional

from lsprotocol import types as T
from lsprotocol.converters import get_converter
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer

from leirc.ide import assists, features, suggestions
from leirc.ide.anchors import contains
from leirc.ide.document import Document
from leirc.ide.edits import TextEdit
from leirc.ide.devices import probe_tracker
from leirc.ide.inline import guarantee, lens_title, lens_tooltip, local_cuda_device, run_device
from leirc.lang.diagnostics import ERROR, WARNING, Diagnostic
from leirc.strategies.base import NotApplicable, Step

from . import __version__
from . import tokens
from .isolation import isolate, resolve
from .positions import Lines

log = logging.getLogger("leirc_lsp")
CONVERTER = get_converter()

SEVERITY = {ERROR: T.DiagnosticSeverity.Error, WARNING: T.DiagnosticSeverity.Warning}
COMPLETION_KINDS = {
    "tensor": T.CompletionItemKind.Variable, "index": T.CompletionItemKind.TypeParameter,
    "function": T.CompletionItemKind.Function, "keyword": T.CompletionItemKind.Keyword,
    "type": T.CompletionItemKind.TypeParameter, "scope": T.CompletionItemKind.EnumMember,
    "snippet": T.CompletionItemKind.Snippet, "strategy": T.CompletionItemKind.Method,
    "property": T.CompletionItemKind.Property,
}
SYMBOL_KINDS = {"kernel": T.SymbolKind.Function, "loop": T.SymbolKind.Namespace, "statement": T.SymbolKind.Field,
                "tensor": T.SymbolKind.Variable}
CMD_VERIFY = "leirc.verifyKernel"
CMD_VERIFY_REWRITE = "leirc.verifyRewrite"
CMD_SUGGEST = "leirc.suggest"
CMD_APPLY = "leirc.applyStep"
CMD_STATS = "leirc.serverStats"
CMD_RUN_DEVICE = "leirc.runOnDevice"
STATUS = "leirc/status"  # server -> client notification: {fallbacks: [{what, message, setting}], trusted}
_TOKENS = itertools.count(1)  # progress tokens: unique for the server's life
UNTRUSTED = "this folder is not trusted: trust it (Workspace Trust) to build, run and verify kernels"


@dataclass
class Settings:
    """Settings from ``initializationOptions`` or the ``leirc`` workspace configuration
    section. RPC and LLM settings are stored for the features that will use them."""

    target: str = "llvm"
    threads: Optional[int] = None
    verify_on_save: bool = False
    debounce_ms: int = 30
    evaluation_timeout_s: float = 300.0
    rpc_tracker: Optional[str] = None  # HOST:PORT of a TVM RPC tracker: "Run on GPU" runs there
    rpc_key: Optional[str] = None  # the device key the tracker serves
    rpc_target: str = "cuda"  # what the remote device runs
    llm_base_url: Optional[str] = None
    llm_model: Optional[str] = None
    llm_api_key_env: Optional[str] = None
    llm_mode: Optional[str] = None
    llm_config: Optional[str] = None  # a TOML/JSON file of LLMConfig fields (the other llm* settings override it)
    llm_cache: Optional[str] = None
    memory: str = ""  # the HTAM memory file ("": ~/.cache/leirc/memory.sqlite; "none": the cost model alone)
    suggestions: int = 5
    #: the code-action list answers with what is listed by then (<= 0: wait for all)
    code_action_budget_ms: int = 50
    diagnostics_mode: str = "auto"  # "push", "pull", or "auto": pull when the client supports it
    #: the editor trusts the folder (VS Code's Workspace Trust): without it nothing is run,
    #: built or sent anywhere (verification, devices, RPC, models); analysis still works
    trusted: bool = True

    KEYS = {"target": "target", "threads": "threads", "verifyOnSave": "verify_on_save", "debounceMs": "debounce_ms",
            "evaluationTimeout": "evaluation_timeout_s", "rpcTracker": "rpc_tracker", "rpcKey": "rpc_key",
            "rpcTarget": "rpc_target", "llmBaseUrl": "llm_base_url",
            "llmModel": "llm_model", "llmApiKeyEnv": "llm_api_key_env", "llmMode": "llm_mode",
            "llmConfig": "llm_config", "llmCache": "llm_cache", "memory": "memory", "suggestions": "suggestions",
            "codeActionBudgetMs": "code_action_budget_ms", "diagnosticsMode": "diagnostics_mode", "trusted": "trusted"}
    CHOICES = {"diagnostics_mode": ("auto", "push", "pull"), "rpc_target": ("cuda", "llvm")}

    def update(self, raw: Any) -> list[str]:
        """Take the known keys of ``raw`` (a dict; nested ``leirc`` section accepted);
        returns the problems (wrong types), which are logged, not fatal."""
        problems = []
        if not isinstance(raw, dict):
            return problems
        if isinstance(raw.get("leirc"), dict):
            raw = raw["leirc"]
        for key, attr in self.KEYS.items():
            if key not in raw:
                continue
            value = raw[key]
            want = type(getattr(Settings, attr)) if getattr(Settings, attr) is not None else None
            if value is None:
                setattr(self, attr, None)
            elif attr in ("threads", "suggestions") and (not isinstance(value, int) or isinstance(value, bool)
                                                          or value < 1):
                problems.append(f"{key} must be a positive integer, not {value!r}")
            elif attr in self.CHOICES and value not in self.CHOICES[attr]:
                problems.append(f"{key} must be one of {', '.join(self.CHOICES[attr])}, not {value!r}")
            elif attr.startswith(("llm_", "rpc_")) and not isinstance(value, str):
                problems.append(f"{key} must be a string, not {value!r}")
            elif want is bool and not isinstance(value, bool):
                problems.append(f"{key} must be true or false, not {value!r}")
            elif want in (int, float) and (not isinstance(value, (int, float)) or isinstance(value, bool)):
                problems.append(f"{key} must be a number, not {value!r}")
            elif want is str and not isinstance(value, str):
                problems.append(f"{key} must be a string, not {value!r}")
            else:
                setattr(self, attr, want(value) if want in (int, float) else value)
        return problems

    def device(self) -> Optional[dict]:
        """Where "Run on GPU" runs (:func:`leirc.ide.inline.run_device`); None when nowhere.
        Raises ValueError for an RPC setting that cannot work."""
        if not self.trusted:
            return None
        return run_device(self.target, self.rpc_tracker, self.rpc_key, self.rpc_target)

    def llm(self):
        """The :class:`leirc.llm.LLMConfig` the LLM settings describe, or None when they
        name no endpoint (base URL and model, or a config file). Raises ValueError with a
        message for bad values or when the LLM layer is missing."""
        given = {k: v for k, v in (("base_url", self.llm_base_url), ("models", self.llm_model),
                                   ("key_env", self.llm_api_key_env), ("mode", self.llm_mode)) if v}
        if not self.llm_config and not (self.llm_base_url and self.llm_model):
            return None
        if not self.trusted:
            raise ValueError(UNTRUSTED + " (no model is asked)")
        if self.llm_cache:
            given["cache"] = None if self.llm_cache.lower() == "none" else resolve(self.llm_cache)
        try:
            from leirc.llm import LLMError, config_from
        except ImportError as e:
            raise ValueError(f"the LLM layer is not available ({e})") from None
        try:
            return config_from(given, resolve(self.llm_config) if self.llm_config else None)
        except LLMError as e:
            raise ValueError(str(e)) from None


@dataclass
class DocState:
    uri: str
    text: str
    version: Optional[int]
    analyzed: Optional[Document] = None  # the analysis of `text`, when done
    analyzed_version: Optional[int] = None
    #: the one analysis under way for this document (of ``inflight_text``), awaited by
    #: every request that arrives meanwhile: a burst of edits queues no analysis per version
    inflight: Optional[asyncio.Future] = None
    inflight_text: Optional[str] = None
    pending: Optional[asyncio.Task] = None
    edited_line: int = 1  # the first line the last change touched (for prefetching)
    #: kernel name -> (its text when evaluated, outcome dict)
    evaluations: dict = field(default_factory=dict)
    #: kernel name -> (its text when run, outcome dict) on the settings' device ("Run on GPU")
    device_evaluations: dict = field(default_factory=dict)
    running: set = field(default_factory=set)
    #: kernel name -> directions of the strategy steps applied here (the memory's prefix)
    history: dict = field(default_factory=dict)


class LeircServer(LanguageServer):
    def __init__(self):
        super().__init__("leirc-lsp", __version__)
        self.settings = Settings()
        self.docs: dict[str, DocState] = {}
        # one analysis thread: requests queue behind each other instead of fighting for the GIL
        self.analysis_pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="leirc-analysis")
        # code actions get threads of their own so that listing never delays the diagnostics
        # of the next keystroke, and the strategies that list slowly never delay the others
        self.action_pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="leirc-actions")
        self._slow_pool: Optional[concurrent.futures.ProcessPoolExecutor] = None
        self.slow_queued: dict[str, concurrent.futures.Future] = {}
        self.suggest_pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="leirc-suggest")
        # what a request computes from an analysis (tokens, formatting, symbols, hints,
        # completion, code-action lists): never on the event loop, never behind an analysis
        self.feature_pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="leirc-features")
        self.background: set[asyncio.Task] = set()
        self.pull = False  # diagnostics are pulled by the client (decided at initialize)
        self.memory = None  # the HTAM memory, loaded at the first suggestion
        #: what is not used and why ("model", "gpu", "tracker" -> {what, message, setting}),
        #: sent whole as the ``leirc/status`` notification whenever it changes
        self.fallbacks: dict[str, dict] = {}
        self.memory_key: Optional[tuple] = None

    # -- documents ---------------------------------------------------------------
    async def run_blocking(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self.analysis_pool, fn, *args)

    async def run_actions(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self.action_pool, fn, *args)

    async def document(self, uri: str) -> Optional[Document]:
        """The analysis of the document's newest text. At most one analysis per document
        runs at a time; requests that arrive meanwhile wait for it, and when the text
        changed in between, for one more of the newest text (never one per version
        typed). Under a burst that outpaces the analysis, the newest finished analysis
        is answered after three rounds rather than none at all."""
        st = self.docs.get(uri)
        loop = asyncio.get_running_loop()
        newest: Optional[Document] = None
        for _ in range(3):
            if st is None or self.docs.get(uri) is not st:
                return newest
            if st.analyzed is not None and st.analyzed.text == st.text:
                return st.analyzed
            if st.inflight is None or st.inflight.done():
                text = st.text
                st.inflight_text = text
                st.inflight = loop.run_in_executor(self.analysis_pool, _analyze, text, _file_of(uri))
                st.inflight.add_done_callback(lambda f, st=st, text=text, version=st.version:
                                              _store_analysis(st, f, text, version))
            newest = await asyncio.shield(st.inflight)
        return newest

    async def off_loop(self, fn, *args):
        """Run ``fn(*args)`` in the features thread; a cancelled request
        (``$/cancelRequest``) drops it when it has not started."""
        fut = self.feature_pool.submit(fn, *args)
        try:
            return await asyncio.wrap_future(fut)
        except asyncio.CancelledError:
            fut.cancel()
            raise

    def schedule_diagnostics(self, uri: str, delay: Optional[float] = None) -> None:
        st = self.docs.get(uri)
        if st is None:
            return
        if st.pending is not None and not st.pending.done():
            st.pending.cancel()
        st.pending = self.spawn(self._diagnose(uri, self.settings.debounce_ms / 1000 if delay is None else delay))

    def spawn(self, coro) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)
        return task

    async def _diagnose(self, uri: str, delay: float) -> None:
        try:
            if delay > 0:
                await asyncio.sleep(delay)
            st = self.docs.get(uri)
            if st is None:
                return
            version = st.version
            if is_trace(uri):
                self.publish_trace(uri, st)
                return
            doc = await self.document(uri)
            st = self.docs.get(uri)
            if doc is None or st is None or st.version != version:
                return  # stale: a newer edit has its own pass scheduled
            if not self.pull:  # a pulling client asks itself; the analysis is ready for it
                self.publish(uri, doc)
            self.prefetch(uri, doc, st.edited_line)
        except asyncio.CancelledError:
            pass
        except Exception:  # a bug must not end the server: log it, keep serving
            report_failure(self, "diagnostics")

    def prefetch(self, uri: str, doc: Document, line: int) -> None:
        """List the code actions at the edited line now, off the loop: the editor asks for
        them next. The fast strategies and the slow ones go to their own threads; work for
        a kernel text that is no longer in the document is skipped."""
        if is_trace(uri):
            return
        got = assists.focus_at(doc, line, _first_column(doc, line))
        if got is None:
            return
        seg, focus = got
        self.list_actions(uri, doc, seg, focus)

    def list_actions(self, uri: str, doc: Document, seg, focus) -> Optional[concurrent.futures.Future]:
        """Start listing ``focus`` (the fast strategies in the actions thread, the slow ones
        in the worker process) unless already under way; returns the fast part's future."""
        if focus.complete:
            return None
        fast, slow = assists.split_by_cost(focus.missing())
        fut = focus.futures.get("fast")
        if fast and (fut is None or fut.done()):
            stale = self._stale_check(uri, seg)
            fut = focus.futures["fast"] = self.action_pool.submit(_quietly, lambda: focus.compute(fast, stale))
        sfut = focus.futures.get("slow")
        if slow and (sfut is None or sfut.done()):
            self._list_slow(uri, seg, seg is doc.segments[-1], focus, slow)
        return fut

    @property
    def slow_pool(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._slow_pool is None:
            import multiprocessing

            # spawn, not fork: this process runs threads
            self._slow_pool = concurrent.futures.ProcessPoolExecutor(
                1, mp_context=multiprocessing.get_context("spawn"), initializer=assists.lower_priority,
                initargs=(os.getpid(),))
        return self._slow_pool

    def _list_slow(self, uri: str, seg, last: bool, focus, names: list[str]) -> None:
        old = self.slow_queued.pop(uri, None)
        if old is not None:
            old.cancel()  # not started yet: its text is no longer where the editor is
        try:
            fut = self.slow_pool.submit(assists.list_in_worker, seg.text, last, focus.path, names, focus.per_site)
        except (concurrent.futures.BrokenExecutor, RuntimeError):
            self._slow_pool = None  # the worker died (killed, out of memory): a fresh one
            try:
                fut = self.slow_pool.submit(assists.list_in_worker, seg.text, last, focus.path, names,
                                            focus.per_site)
            except Exception:  # no worker process here: the fast strategies still list
                log.warning("cannot start the listing worker:\n%s", traceback.format_exc())
                return

        def merged(f: concurrent.futures.Future) -> None:
            if f.cancelled():
                return
            try:
                focus.merge(f.result())
            except concurrent.futures.BrokenExecutor:
                self._slow_pool = None
            except Exception:  # the fast strategies still list; the next request retries
                log.debug("slow listing failed:\n%s", traceback.format_exc())

        fut.add_done_callback(merged)
        focus.futures["slow"] = fut
        self.slow_queued[uri] = fut

    def _stale_check(self, uri: str, seg):
        body = seg.text[seg.pad:]

        def stale() -> bool:
            st = self.docs.get(uri)
            return st is None or body not in st.text
        return stale

    def diagnostics_of(self, uri: str, doc: Document) -> list[T.Diagnostic]:
        st = self.docs[uri]
        lines = Lines(doc.text)
        out = [to_lsp_diagnostic(lines, d) for d in doc.diagnostics()]
        out.extend(self._evaluation_diagnostics(st, doc, lines))
        return out

    def publish(self, uri: str, doc: Document) -> None:
        if self.pull:
            self._refresh_diagnostics()
            return
        st = self.docs[uri]
        self.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=uri, version=st.version,
                                                                          diagnostics=self.diagnostics_of(uri, doc)))

    def trace_diagnostics(self, st: DocState) -> list[T.Diagnostic]:
        lines = Lines(st.text)
        return [T.Diagnostic(range=lines.range_of(ln, c, ln, c + 1), message=msg, severity=T.DiagnosticSeverity.Error,
                             source="leirc", code="trace") for ln, c, msg in features.trace_problems(st.text)]

    def publish_trace(self, uri: str, st: DocState) -> None:
        if self.pull:
            return  # the client asks
        self.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=uri, version=st.version,
                                                                          diagnostics=self.trace_diagnostics(st)))

    def _refresh_diagnostics(self) -> None:
        """Pull mode: something the client did not change (a verification outcome) changed
        the diagnostics; ask it to pull again when it can be asked."""
        caps = self.client_capabilities.workspace
        if caps is not None and caps.diagnostics is not None and caps.diagnostics.refresh_support:
            self.spawn(self._send_diagnostic_refresh())

    async def _send_diagnostic_refresh(self):
        try:
            await self.workspace_diagnostic_refresh_async(None)
        except Exception:  # the client may not answer; nothing depends on it
            log.debug("workspace/diagnostic/refresh not answered")

    def _evaluation_diagnostics(self, st: DocState, doc: Document, lines: Lines) -> list[T.Diagnostic]:
        out = []
        for seg, k in doc.kernels():
            hit = st.evaluations.get(k.name)
            if hit is None or hit[0] != seg.text or k.span is None:
                continue
            d = hit[1]
            sp = seg.to_doc(k.span)
            # the whole story (criterion, bound, runs; or the whole error), not the lens's short title
            out.append(T.Diagnostic(range=lines.range_of(sp.line, sp.col, sp.line, sp.col + len("\\kernel")),
                                    message=f"{k.name}: {lens_tooltip(d)}" + (f" (vs {d['against']})" if d.get("against") else ""),
                                    severity=T.DiagnosticSeverity.Information if d.get("ok") else T.DiagnosticSeverity.Warning,
                                    source="leirc verify", code="verify"))
        return out

    # -- fallbacks -----------------------------------------------------------------
    def set_fallback(self, what: str, message: str, setting: str) -> None:
        """Say (once per distinct message) that ``what`` is not used, why, and the setting
        that changes it: the ``leirc/status`` notification (the editor's status bar and a
        one-time notification) and the log."""
        entry = {"what": what, "message": message, "setting": setting}
        if self.fallbacks.get(what) == entry:
            return
        self.fallbacks[what] = entry
        log.warning("%s not used: %s", what, message)
        self.send_status()

    def clear_fallback(self, what: str) -> None:
        if self.fallbacks.pop(what, None) is not None:
            self.send_status()

    def send_status(self) -> None:
        try:
            self.protocol.notify(STATUS, {"fallbacks": list(self.fallbacks.values()),
                                          "trusted": self.settings.trusted})
        except Exception:  # no connection yet (or any more): the next change sends it again
            log.debug("leirc/status not sent")

    async def check_fallbacks(self) -> None:
        """Find out, from the settings and in seconds, whether the model, the GPU and the
        tracker the settings name can be used (run when the settings arrive or change)."""
        loop = asyncio.get_running_loop()
        if not self.settings.trusted:  # nothing is used in an untrusted folder: said by the editor
            for what in list(self.fallbacks):
                self.clear_fallback(what)
            return
        try:
            llm = self.settings.llm()
            why = None if llm is None else await loop.run_in_executor(None, _llm_unusable, llm)
        except ValueError as e:
            llm, why = None, (str(e), "leir.llm.baseUrl")
        if why is not None:
            self.set_fallback("model", f"suggestions are ranked offline (cost model): {why[0]}", why[1])
        else:
            self.clear_fallback("model")
        if self.settings.target == "cuda" and not local_cuda_device():
            self.set_fallback("gpu", "leir.target is cuda but this machine has no NVIDIA GPU (no /dev/nvidiactl): "
                                     "verifying and timing here will fail; set leir.target to llvm, or "
                                     "leir.rpc.tracker and leir.rpc.key to run on a remote GPU", "leir.target")
        else:
            self.clear_fallback("gpu")
        if self.settings.rpc_tracker or self.settings.rpc_key:
            probe = await loop.run_in_executor(None, probe_tracker, self.settings.rpc_tracker, self.settings.rpc_key)
            self.note_probe(probe)
        else:
            self.clear_fallback("tracker")

    def note_probe(self, probe) -> None:
        if probe.kind in ("ok", "busy"):
            self.clear_fallback("tracker")
        else:
            setting = "leir.rpc.key" if probe.kind == "unknown-key" or "rpc.key" in probe.message else "leir.rpc.tracker"
            self.set_fallback("tracker", f"Run on GPU is off: {probe.message}", setting)

    # -- suggestions -------------------------------------------------------------
    def load_memory(self):
        """The HTAM memory of the settings (read once per file and target, then kept in
        this process; the file is never held open nor written)."""
        key = (self.settings.memory, self.settings.target)
        if self.memory_key != key:
            memory = self.settings.memory
            if memory and memory.lower() != "none":
                memory = resolve(memory)
            self.memory = suggestions.open_memory(memory or None, self.settings.target,
                                                  warn=lambda m: log.warning("%s", m))
            self.memory_key = key
        return self.memory

    def note_applied(self, uri: str, kernel: str, strategy: Optional[str]) -> None:
        st = self.docs.get(uri)
        if st is None or not strategy:
            return
        from leirc.search.directions import direction_of

        try:
            st.history.setdefault(kernel, []).append(direction_of(strategy))
        except Exception:  # an unknown name (an old client's argument) adds nothing
            log.debug("no direction for %r", strategy)

    # -- evaluation --------------------------------------------------------------
    async def evaluate(self, uri: str, kernel: str, reference: Optional[str], against: str,
                       device: Optional[dict] = None, strategy: Optional[str] = None) -> dict:
        """Verify (and time) ``kernel`` of the document against ``reference`` in a process
        of its own; the outcome is remembered for the kernel's current text, shown on its
        lens and published as a diagnostic. ``device`` (:meth:`Settings.device`): run there
        instead of on the settings' target; the outcome goes to the device lens only."""
        st = self.docs.get(uri)
        if not self.settings.trusted:
            # nothing of an untrusted folder is built or run (it would execute its kernels)
            return {"ok": False, "error_kind": "untrusted", "error": UNTRUSTED}
        doc = await self.document(uri)
        if st is None or doc is None:
            return {"ok": False, "error_kind": "illegal", "error": "document not open"}
        seg = doc.segment_of(kernel)
        # after a strategy edit the client may send the changed text after running the
        # command: give it a moment, so the new version is verified, not the old one
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10.0
        while reference is not None and seg is not None and seg.text == reference and loop.time() < deadline:
            await asyncio.sleep(0.05)
            doc = await self.document(uri)
            if doc is None:
                return {"ok": False, "error_kind": "illegal", "error": "document closed"}
            seg = doc.segment_of(kernel)
        if seg is None:
            return {"ok": False, "error_kind": "illegal", "error": f"no kernel '{kernel}'"}
        marker = kernel if device is None else f"{kernel}@device"
        st.running.add(marker)
        self._refresh_lenses()
        request = {"text": seg.text, "kernel": kernel, "reference": reference, "target": self.settings.target,
                   "threads": self.settings.threads, "time": True, "timeout": self.settings.evaluation_timeout_s}
        if device is not None:
            request.update(target=device["target"], rpc=device["rpc"])
        if strategy:
            request["numerics"] = _numerics_of(strategy)
        try:
            outcome = await run_evaluation(request, self.settings.evaluation_timeout_s + 60)
        finally:
            st.running.discard(marker)
        outcome["against"] = against
        if (device is None and not outcome.get("ok") and request["target"] == "cuda"
                and outcome.get("error_kind") in ("build", "runtime", "crash") and not local_cuda_device()):
            self.set_fallback("gpu", f"{kernel} was not verified on cuda: this machine has no NVIDIA GPU; set "
                                     f"leir.target to llvm. The error: {outcome.get('detail') or outcome.get('error')}",
                              "leir.target")
        if device is not None:
            outcome["device"] = device["label"]
            st.device_evaluations[kernel] = (seg.text, outcome)
            self._refresh_lenses()
            return outcome
        st.evaluations[kernel] = (seg.text, outcome)
        current = await self.document(uri)
        if current is not None and uri in self.docs:
            self.publish(uri, current)
        self._refresh_lenses()
        return outcome

    def _refresh_lenses(self) -> None:
        caps = self.client_capabilities.workspace
        if caps is not None and caps.code_lens is not None and caps.code_lens.refresh_support:
            self.spawn(self._send_refresh())

    async def _send_refresh(self):
        try:
            await self.workspace_code_lens_refresh_async(None)
        except Exception:  # the client may not answer; nothing depends on it
            log.debug("codeLens/refresh not answered")


def _quietly(fn):
    try:
        return fn()
    except Exception:  # a prefetch is an optimization; the request itself reports problems
        log.debug("prefetch failed:\n%s", traceback.format_exc())
        return None


def _first_column(doc: Document, line: int) -> int:
    """The first non-blank column of ``line`` (1-based), where an editor's cursor sits
    after indenting."""
    off = doc.offset_of(line, 1)
    end = doc.text.find("\n", off)
    text = doc.text[off:end if end >= 0 else len(doc.text)]
    return len(text) - len(text.lstrip()) + 1


def _first_difference(a: str, b: str) -> int:
    n = min(len(a), len(b))
    lo, hi = 0, n
    while lo < hi:  # binary search on equal prefixes: O(log n) slice comparisons
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def is_trace(uri: str) -> bool:
    """A trace file (JSON steps) rather than LEIR source."""
    return uri.endswith(".json")


def _file_of(uri: str) -> str:
    return uri[len("file://"):] if uri.startswith("file://") else uri


def _store_analysis(st: DocState, fut: asyncio.Future, text: str, version: Optional[int]) -> None:
    if fut.cancelled() or fut.exception() is not None:
        return
    # one analysis at a time, so each is newer than the one stored: keep it even when the
    # text moved on (it is the newest finished one; requests compare texts before use)
    st.analyzed, st.analyzed_version = fut.result(), version


#: analyses started (leirc.serverStats: a burst of edits must not run one each); only the
#: one analysis thread writes it
ANALYSES = [0]


def _numerics_of(strategy: str) -> Optional[str]:
    from leirc.strategies.base import get

    try:
        return get(strategy).numerics
    except KeyError:  # an old client's name: no claim
        return None


def _llm_unusable(config) -> Optional[tuple[str, str]]:
    """Why the model of ``config`` cannot be asked (message, setting), or None. Opens a
    client the way a suggestion does (its key from the environment), sends nothing."""
    try:
        from leirc.llm import LLMClient, LLMError
    except ImportError as e:
        return f"the LLM layer is not installed ({e}): pip install 'leirc[llm]'", "leir.llm.baseUrl"
    try:
        LLMClient(config).close()
    except LLMError as e:
        return str(e), "leir.llm.keyEnv" if e.kind == "auth" else "leir.llm.baseUrl"
    return None


def _analyze(text: str, file: str) -> Document:
    ANALYSES[0] += 1
    doc = Document(text, file)
    doc.diagnostics()
    return doc


async def run_evaluation(request: dict, timeout: float) -> dict:
    """Run :mod:`leirc_lsp.evaluate` in a new process group; kill the group on timeout."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "leirc_lsp.evaluate", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, start_new_session=True)
    try:
        out, err = await asyncio.wait_for(proc.communicate(json.dumps(request).encode()), timeout)
    except asyncio.TimeoutError:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        await proc.wait()
        return {"ok": False, "error_kind": "timeout", "error": f"no answer within {timeout:.0f} s"}
    if proc.returncode != 0:
        lines = err.decode(errors="replace").strip().splitlines() if err else []
        why = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit status {proc.returncode}"
        error = f"the evaluation process died ({why})" + (f": {lines[-1]}" if lines else "")
        # the whole story for the hover, not only the last line
        return {"ok": False, "error_kind": "crash", "error": error,
                "detail": error + ("\n" + "\n".join(lines[-40:]) if len(lines) > 1 else "")}
    try:
        return json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"ok": False, "error_kind": "crash", "error": "the evaluation process gave no answer"}


def to_lsp_diagnostic(lines: Lines, d: Diagnostic) -> T.Diagnostic:
    sp = d.span
    rng = lines.range(sp)
    if sp is not None and (sp.line, sp.col) == (sp.end_line, sp.end_col):
        rng = lines.range_of(sp.line, sp.col, sp.line, sp.col + 1)
    msg = d.message + "".join("\n" + n for n in d.notes)
    return T.Diagnostic(range=rng, message=msg, severity=SEVERITY.get(d.severity, T.DiagnosticSeverity.Information),
                        code=d.code, source="leirc")


def to_lsp_edits(lines: Lines, edits: list[TextEdit]) -> list[T.TextEdit]:
    return [T.TextEdit(range=lines.range_of(e.start_line, e.start_col, e.end_line, e.end_col), new_text=e.new_text)
            for e in edits]


server = LeircServer()


def report_failure(ls: LeircServer, what: str) -> None:
    """Log an unexpected exception to stderr and to the client's log (window/logMessage)."""
    tb = traceback.format_exc()
    log.error("%s failed:\n%s", what, tb)
    try:
        ls.window_log_message(T.LogMessageParams(type=T.MessageType.Error,
                                                 message=f"leirc: {what} failed: {tb.strip().splitlines()[-1]}"))
    except Exception:  # the connection itself may be the problem
        log.debug("could not send the failure to the client")


def guarded(default):
    """Handlers answer ``default`` instead of an error when something unexpected fails
    (and log it): an editor must always get an answer."""
    def deco(fn):
        import functools

        @functools.wraps(fn)
        async def wrapper(ls, params):
            try:
                return await fn(ls, params)
            except asyncio.CancelledError:
                raise
            except Exception:
                report_failure(ls, fn.__name__)
                return default() if callable(default) else default
        return wrapper
    return deco


# ---------------------------------------------------------------------------
# lifecycle and synchronization


@server.feature(T.INITIALIZE)
def on_initialize(ls: LeircServer, params: T.InitializeParams):
    for p in ls.settings.update(params.initialization_options or {}):
        log.warning("setting ignored: %s", p)
        ls.window_log_message(T.LogMessageParams(type=T.MessageType.Warning, message=f"leirc: setting ignored: {p}"))
    _check_device_settings(ls)
    mode = ls.settings.diagnostics_mode
    td = params.capabilities.text_document if params.capabilities else None
    can_pull = td is not None and td.diagnostic is not None
    ls.pull = mode == "pull" or (mode == "auto" and can_pull)
    if not ls.pull:
        # offering both would show every problem twice (../shared/notes/editor.md §1):
        # the capabilities are computed from the registered features after this handler
        ls.protocol.fm.features.pop(T.TEXT_DOCUMENT_DIAGNOSTIC, None)
        ls.protocol.fm.feature_options.pop(T.TEXT_DOCUMENT_DIAGNOSTIC, None)


@server.feature(T.INITIALIZED)
def on_initialized(ls: LeircServer, params: T.InitializedParams):
    # import the strategies, SymPy and the suggestion ranking, and learn which strategies
    # list slowly, in the background: the first code-action list should pay for none of
    # it (a daemon thread: it never delays the exit)
    threading.Thread(target=_warm_up, name="leirc-warm-up", daemon=True).start()
    ls.spawn(_checked(ls))


async def _checked(ls: LeircServer) -> None:
    try:
        await ls.check_fallbacks()
    except Exception:  # a check must never take the server down
        report_failure(ls, "checking the settings")


@server.feature(T.SHUTDOWN)
def on_shutdown(ls: LeircServer, params):
    # queued prefetches and plans are not waited for at exit
    for pool in (ls.action_pool, ls.analysis_pool, ls.suggest_pool, ls.feature_pool, ls._slow_pool):
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


#: a kernel with a reduction, a pointwise pass and three nests: enough for every family of
#: strategies to list something, so their import and their listing cost are known
WARM_UP = r"""\kernel warm(X: f32[64, 128]) -> (Y: f32[64, 128]) {
  L^{64}_{i=0} L^{128}_{j=0} [ M^{f32,l}_{i} = max(M^{f32,l}_{i}, X^{f32,g}_{i,j}); ];
  L^{64}_{i=0} L^{128}_{j=0} [ S^{f32,l}_{i} = S^{f32,l}_{i} + exp(X^{f32,g}_{i,j} - M^{f32,l}_{i}); ];
  L^{64}_{i=0} L^{128}_{j=0} [ Y^{f32,g}_{i,j} = exp(X^{f32,g}_{i,j} - M^{f32,l}_{i}) / S^{f32,l}_{i}; ];
}
"""


def _warm_up():
    try:
        # the listing worker imports and lists every strategy while this thread does the same here
        server.slow_pool.submit(assists.warm_worker, WARM_UP)
        doc = Document(WARM_UP, "<warm-up>")
        seg = doc.segment_of("warm")
        if seg is None or seg.result is None or not seg.result.ok:
            log.debug("warm-up kernel does not check: %s", [str(d) for d in doc.diagnostics()])
            return
        for line in (2, 3, 4):
            assists.prefetch(doc, line)
        suggestions.suggest(doc, "warm", 1)
    except Exception:  # warming is an optimization only
        log.debug("warm-up failed:\n%s", traceback.format_exc())


@server.feature(T.WORKSPACE_DID_CHANGE_CONFIGURATION)
def on_configuration(ls: LeircServer, params: T.DidChangeConfigurationParams):
    for p in ls.settings.update(params.settings or {}):
        ls.window_log_message(T.LogMessageParams(type=T.MessageType.Warning, message=f"leirc: setting ignored: {p}"))
    _check_device_settings(ls)
    ls.spawn(_checked(ls))


def _check_device_settings(ls: LeircServer) -> None:
    """Say once, when the settings arrive, why there is no "Run on GPU" lens."""
    try:
        ls.settings.device()
    except ValueError as e:
        log.warning("no Run on GPU lens: %s", e)
        ls.window_log_message(T.LogMessageParams(type=T.MessageType.Warning, message=f"leirc: no Run on GPU lens: {e}"))


@server.feature(T.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: LeircServer, params: T.DidOpenTextDocumentParams):
    td = params.text_document
    ls.docs[td.uri] = DocState(td.uri, td.text, td.version)
    ls.schedule_diagnostics(td.uri, delay=0)


@server.feature(T.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: LeircServer, params: T.DidChangeTextDocumentParams):
    uri = params.text_document.uri
    doc = ls.workspace.get_text_document(uri)  # pygls applied the (incremental) changes
    st = ls.docs.get(uri)
    if st is None:
        st = ls.docs[uri] = DocState(uri, doc.source, params.text_document.version)
    ranges = [c.range for c in params.content_changes if isinstance(c, T.TextDocumentContentChangePartial)]
    if ranges and len(ranges) == len(params.content_changes):
        # an incremental change says where it is: no comparison of two large texts per key
        st.edited_line = min(r.start.line for r in ranges) + 1
    else:
        i = _first_difference(st.text, doc.source)
        st.edited_line = doc.source.count("\n", 0, i) + 1
    st.text, st.version = doc.source, params.text_document.version
    ls.schedule_diagnostics(uri)


@server.feature(T.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: LeircServer, params: T.DidSaveTextDocumentParams):
    uri = params.text_document.uri
    if not ls.settings.verify_on_save or uri not in ls.docs:
        return
    ls.spawn(_verify_changed(ls, uri))


async def _verify_changed(ls: LeircServer, uri: str):
    doc = await ls.document(uri)
    st = ls.docs.get(uri)
    if doc is None or st is None:
        return
    for seg, k in doc.kernels():
        hit = st.evaluations.get(k.name)
        if seg.result is not None and seg.result.ok and (hit is None or hit[0] != seg.text) and k.name not in st.running:
            await ls.evaluate(uri, k.name, None, "the interpreter")


@server.feature(T.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: LeircServer, params: T.DidCloseTextDocumentParams):
    st = ls.docs.pop(params.text_document.uri, None)
    if st is not None and st.pending is not None:
        st.pending.cancel()
    ls.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))


# ---------------------------------------------------------------------------
# language features


def _pos(doc: Document, p: T.Position) -> tuple[int, int]:
    return Lines(doc.text).from_lsp(p)


@server.feature(T.TEXT_DOCUMENT_DIAGNOSTIC, T.DiagnosticOptions(identifier="leirc", inter_file_dependencies=False,
                                                             workspace_diagnostics=False))
async def pull_diagnostics(ls: LeircServer, params: T.DocumentDiagnosticParams):
    """Pull diagnostics (LSP 3.17): the report of the current text; ``unchanged`` when it
    equals the one the client holds (its result id is a digest of the report)."""
    uri = params.text_document.uri
    st = ls.docs.get(uri)
    try:
        if st is None:
            items = []
        elif is_trace(uri):
            items = ls.trace_diagnostics(st)
        else:
            doc = await ls.document(uri)
            items = ls.diagnostics_of(uri, doc) if doc is not None and uri in ls.docs else []
            if doc is not None:
                ls.prefetch(uri, doc, st.edited_line)
    except asyncio.CancelledError:
        raise
    except Exception:  # an editor must always get an answer
        report_failure(ls, "diagnostics")
        items = []
    raw = json.dumps(CONVERTER.unstructure(items), sort_keys=True)
    rid = hashlib.sha1(raw.encode()).hexdigest()[:16]
    if params.previous_result_id == rid:
        return T.RelatedUnchangedDocumentDiagnosticReport(result_id=rid)
    return T.RelatedFullDocumentDiagnosticReport(items=items, result_id=rid)


@server.feature(T.TEXT_DOCUMENT_HOVER)
@guarded(None)
async def hover(ls: LeircServer, params: T.HoverParams):
    st = ls.docs.get(params.text_document.uri)
    if st is not None and is_trace(st.uri):
        text = features.trace_hover(st.text, *Lines(st.text).from_lsp(params.position))
        return None if text is None else T.Hover(contents=T.MarkupContent(kind=T.MarkupKind.Markdown, value=text))
    doc = await ls.document(params.text_document.uri)
    if doc is None:
        return None
    h = features.hover(doc, *_pos(doc, params.position))
    if h is None:
        return None
    return T.Hover(contents=T.MarkupContent(kind=T.MarkupKind.Markdown, value=h.markdown),
                   range=Lines(doc.text).range(h.span))


@server.feature(T.TEXT_DOCUMENT_DEFINITION)
@guarded(None)
async def definition(ls: LeircServer, params: T.DefinitionParams):
    doc = await ls.document(params.text_document.uri)
    if doc is None:
        return None
    sp = features.definition(doc, *_pos(doc, params.position))
    return None if sp is None else T.Location(uri=params.text_document.uri, range=Lines(doc.text).range(sp))


@server.feature(T.TEXT_DOCUMENT_REFERENCES)
@guarded(list)
async def references(ls: LeircServer, params: T.ReferenceParams):
    doc = await ls.document(params.text_document.uri)
    if doc is None:
        return []
    lines = Lines(doc.text)
    return [T.Location(uri=params.text_document.uri, range=lines.range(sp))
            for sp in features.references(doc, *_pos(doc, params.position), params.context.include_declaration)]


@server.feature(T.TEXT_DOCUMENT_DOCUMENT_HIGHLIGHT)
@guarded(list)
async def highlight(ls: LeircServer, params: T.DocumentHighlightParams):
    doc = await ls.document(params.text_document.uri)
    if doc is None:
        return []
    lines = Lines(doc.text)
    return [T.DocumentHighlight(range=lines.range(sp),
                                kind=T.DocumentHighlightKind.Write if w else T.DocumentHighlightKind.Read)
            for sp, w in features.highlights(doc, *_pos(doc, params.position))]


@server.feature(T.TEXT_DOCUMENT_PREPARE_RENAME)
@guarded(None)
async def prepare_rename(ls: LeircServer, params: T.PrepareRenameParams):
    doc = await ls.document(params.text_document.uri)
    if doc is None:
        return None
    r = features.prepare_rename(doc, *_pos(doc, params.position))
    if r is None:
        return None
    return T.PrepareRenamePlaceholder(range=Lines(doc.text).range(r[0]), placeholder=r[1])


@server.feature(T.TEXT_DOCUMENT_RENAME)
async def rename(ls: LeircServer, params: T.RenameParams):
    doc = await ls.document(params.text_document.uri)
    if doc is None:
        return None
    try:
        edits = features.rename(doc, *_pos(doc, params.position), params.new_name)
    except features.RenameError as e:
        # LSP's RequestFailed: the client shows the message
        raise JsonRpcException(str(e), code=-32803) from None
    return T.WorkspaceEdit(changes={params.text_document.uri: to_lsp_edits(Lines(doc.text), edits)})


def lsp_symbol(lines: Lines, s: features.Symbol) -> T.DocumentSymbol:
    return T.DocumentSymbol(name=s.name, detail=s.detail or None, kind=SYMBOL_KINDS.get(s.kind, T.SymbolKind.Object),
                            range=lines.range(s.span), selection_range=lines.range(s.selection),
                            children=[lsp_symbol(lines, c) for c in s.children] or None)


@server.feature(T.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
@guarded(list)
async def document_symbols(ls: LeircServer, params: T.DocumentSymbolParams):
    doc = await ls.document(params.text_document.uri)
    if doc is None:
        return []
    return await ls.off_loop(outline, doc)


def outline(doc: Document) -> list[dict]:
    """The outline as LSP JSON, kernel by kernel: each kernel's tree is converted once per
    kernel text (in its own lines, UTF-16 columns of its real first line) and moved to its
    place by adding its first line; a bare body is converted whole."""
    out: list[dict] = []
    lines = None
    for seg, k in doc.kernels():
        local = features.kernel_symbols(seg)
        if local is None:
            if k.span is None and not seg.text.strip():
                continue
            lines = lines or Lines(doc.text)
            out.extend(CONVERTER.unstructure(lsp_symbol(lines, s)) for s in features.document_symbols(doc)
                       if s.name == k.name)
            continue
        prefix = doc.text[seg.offset:seg.offset + seg.pad]
        key = (seg.text, k.name, prefix)
        with _SYMBOL_LOCK:
            hit = _SYMBOL_JSON.get(key)
        if hit is None:
            hit = CONVERTER.unstructure(lsp_symbol(Lines(prefix + seg.text[seg.pad:]), local))
            with _SYMBOL_LOCK:
                _SYMBOL_JSON[key] = hit
                while len(_SYMBOL_JSON) > 512:
                    _SYMBOL_JSON.popitem(last=False)
        out.append(_shifted(hit, seg.line0))
    return out


_SYMBOL_JSON: "OrderedDict[tuple, dict]" = OrderedDict()
_SYMBOL_LOCK = threading.Lock()


def _shifted(sym: dict, lines: int) -> dict:
    if lines == 0:
        return sym
    out = dict(sym)
    for key in ("range", "selectionRange"):
        r = sym[key]
        out[key] = {"start": {"line": r["start"]["line"] + lines, "character": r["start"]["character"]},
                    "end": {"line": r["end"]["line"] + lines, "character": r["end"]["character"]}}
    if sym.get("children"):
        out["children"] = [_shifted(c, lines) for c in sym["children"]]
    return out


@server.feature(T.TEXT_DOCUMENT_FOLDING_RANGE)
@guarded(list)
async def folding(ls: LeircServer, params: T.FoldingRangeParams):
    doc = await ls.document(params.text_document.uri)
    if doc is None:
        return []
    found = await ls.off_loop(features.folding_ranges, doc)
    return [T.FoldingRange(start_line=a - 1, end_line=b - 1,
                           kind=T.FoldingRangeKind.Comment if kind == "comment" else T.FoldingRangeKind.Region)
            for a, b, kind in found]


LEGEND = T.SemanticTokensLegend(token_types=list(features.TOKEN_TYPES), token_modifiers=list(features.TOKEN_MODIFIERS))


@server.feature(T.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, LEGEND)
@guarded(lambda: T.SemanticTokens(data=[]))
async def semantic_tokens(ls: LeircServer, params: T.SemanticTokensParams):
    doc = await ls.document(params.text_document.uri)
    if doc is None:
        return T.SemanticTokens(data=[])
    # kernel by kernel, cached (leirc_lsp.tokens): an edit re-encodes only its kernel
    return T.SemanticTokens(data=await ls.off_loop(tokens.encode, doc))


@server.feature(T.TEXT_DOCUMENT_COMPLETION, T.CompletionOptions(trigger_characters=["\\", "{", ",", "^", "_"]))
@guarded(lambda: T.CompletionList(is_incomplete=False, items=[]))
async def completion(ls: LeircServer, params: T.CompletionParams):
    uri = params.text_document.uri
    st = ls.docs.get(uri)
    if st is None:
        return T.CompletionList(is_incomplete=False, items=[])
    if is_trace(uri):
        found = features.trace_completions(st.text, *Lines(st.text).from_lsp(params.position))
    else:
        doc = await ls.document(uri)
        found = await ls.off_loop(features.completions, doc, *_pos(doc, params.position)) if doc is not None else []
    items = []
    for c in found:
        items.append(T.CompletionItem(
            label=c.label, kind=COMPLETION_KINDS.get(c.kind), detail=c.detail or None,
            documentation=c.documentation or None, insert_text=c.insert_text,
            insert_text_format=T.InsertTextFormat.Snippet if c.snippet else T.InsertTextFormat.PlainText))
    return T.CompletionList(is_incomplete=False, items=items)


@server.feature(T.TEXT_DOCUMENT_SIGNATURE_HELP, T.SignatureHelpOptions(trigger_characters=["(", ","]))
@guarded(None)
async def signature_help(ls: LeircServer, params: T.SignatureHelpParams):
    doc = await ls.document(params.text_document.uri)
    if doc is None:
        return None
    s = features.signature_help(doc, *_pos(doc, params.position))
    if s is None:
        return None
    return T.SignatureHelp(signatures=[T.SignatureInformation(
        label=s.label, documentation=s.documentation, parameters=[T.ParameterInformation(label=p) for p in s.parameters])],
        active_signature=0, active_parameter=s.active)


@server.feature(T.TEXT_DOCUMENT_INLAY_HINT)
@guarded(list)
async def inlay_hints(ls: LeircServer, params: T.InlayHintParams):
    doc = await ls.document(params.text_document.uri)
    if doc is None:
        return []
    r = params.range
    found = await ls.off_loop(features.inlay_hints, doc, r.start.line + 1, r.end.line + 1)
    lines = Lines(doc.text)
    return [T.InlayHint(position=lines.to_lsp(h.line, h.col), label=h.label, kind=T.InlayHintKind.Type,
                        tooltip=h.tooltip or None, padding_left=False) for h in found]


@server.feature(T.TEXT_DOCUMENT_FORMATTING)
@guarded(None)
async def formatting(ls: LeircServer, params: T.DocumentFormattingParams):
    doc = await ls.document(params.text_document.uri)
    if doc is None:
        return None
    # kernel by kernel, each print cached (features.format_document)
    out = await ls.off_loop(features.format_document, doc)
    if out is None or out == doc.text:
        return [] if out is not None else None
    return [T.TextEdit(range=Lines(doc.text).whole(), new_text=out)]


@server.feature(T.TEXT_DOCUMENT_RANGE_FORMATTING)
@guarded(None)
async def range_formatting(ls: LeircServer, params: T.DocumentRangeFormattingParams):
    doc = await ls.document(params.text_document.uri)
    if doc is None:
        return None
    # only the kernels the range touches are printed
    edits = await ls.off_loop(features.format_range, doc, params.range.start.line + 1, params.range.end.line + 1)
    return to_lsp_edits(Lines(doc.text), edits)


# ---------------------------------------------------------------------------
# strategy code actions, suggestions, lenses


@server.feature(T.TEXT_DOCUMENT_CODE_ACTION, T.CodeActionOptions(
    code_action_kinds=[T.CodeActionKind.RefactorRewrite], resolve_provider=True))
@guarded(list)
async def code_actions(ls: LeircServer, params: T.CodeActionParams):
    only = params.context.only
    if only and not any(T.CodeActionKind.RefactorRewrite.value.startswith(o) for o in only):
        return []
    uri = params.text_document.uri
    doc = await ls.document(uri)
    if doc is None:
        return []
    line, col = _pos(doc, params.range.start)
    version = ls.docs[uri].version if uri in ls.docs else None
    out = []
    # nothing is planned here: the list comes from the strategies' cursor-restricted
    # listing, and a step is planned (and re-checked) when the client resolves it
    got = await ls.off_loop(assists.focus_at, doc, line, col)
    if got is not None:
        seg, focus = got
        fut = ls.list_actions(uri, doc, seg, focus)
        budget = ls.settings.code_action_budget_ms
        pending = [f for f in ([fut] if fut is not None else []) +
                   ([focus.futures.get("slow")] if budget <= 0 else []) if f is not None]
        if pending:
            waits = [asyncio.wrap_future(f) for f in pending]
            # what is not listed by the deadline goes on being listed in its thread and
            # joins the next list here
            await asyncio.wait(waits, timeout=budget / 1000 if budget > 0 else None)
        for a in await ls.off_loop(assists.listed, seg, focus, line, col):
            out.append(T.CodeAction(title=action_title(a.title, a.numerics), kind=T.CodeActionKind.RefactorRewrite,
                                    data={"uri": uri, "kernel": a.kernel, "step": a.step.to_json(), "version": version,
                                          "numerics": a.numerics, "summary": a.summary}))
    seg = doc.segment_at_offset(doc.offset_of(line, col))
    inside = seg.kernel is not None and (not seg.kernel.declared or contains(seg.to_doc(seg.kernel.span), line, col))
    if inside and seg.result is not None and seg.result.ok:
        # the last ranking of this kernel's text, when "Suggest optimization" ran (never
        # ranked here: a list must come back at once)
        for s in suggestions.last(doc, seg.kernel.name)[:3]:
            numerics = _numerics_of(s.step.name)
            out.append(T.CodeAction(title=action_title(f"Suggested: {s.title} — {s.rationale}", numerics),
                                    kind=T.CodeActionKind.RefactorRewrite,
                                    data={"uri": uri, "kernel": s.kernel, "step": s.step.to_json(), "version": version,
                                          "numerics": numerics}))
    return out


@server.feature(T.CODE_ACTION_RESOLVE)
@guarded(lambda: None)
async def resolve_code_action(ls: LeircServer, action: T.CodeAction):
    data = action.data if isinstance(action.data, dict) else {}
    uri, kernel = data.get("uri"), data.get("kernel")
    if not uri or not kernel or "step" not in data:
        return action
    step = Step.from_json(data["step"])
    current = await ls.document(uri)
    if current is None:
        return action
    # the edit is computed for the current text: when the document changed since the
    # action was listed, the step is re-planned and re-checked there
    try:
        edits = await ls.run_actions(assists.resolve, current, kernel, step)
    except NotApplicable as e:
        action.disabled = T.CodeActionDisabled(reason=str(e) or "no longer applies")
        return action
    action.edit = T.WorkspaceEdit(changes={uri: to_lsp_edits(Lines(current.text), edits)})
    seg = current.segment_of(kernel)
    action.command = T.Command(title="Verify the rewrite", command=CMD_VERIFY_REWRITE,
                               arguments=[uri, kernel, seg.text if seg is not None else None, step.name])
    return action


@server.feature(T.TEXT_DOCUMENT_CODE_LENS)
@guarded(list)
async def code_lens(ls: LeircServer, params: T.CodeLensParams):
    uri = params.text_document.uri
    doc = await ls.document(uri)
    st = ls.docs.get(uri)
    if doc is None or st is None:
        return []
    lines = Lines(doc.text)
    out = []
    try:
        device = ls.settings.device()
    except ValueError:  # said once, when the settings arrived
        device = None
    for seg, k in doc.kernels():
        if k.span is None:
            continue
        sp = seg.to_doc(k.span)
        rng = lines.range_of(sp.line, sp.col, sp.line, sp.col)
        hit = st.evaluations.get(k.name)
        if k.name in st.running:
            title = "⏳ verifying…"
        elif hit is not None and hit[0] == seg.text:
            title = lens_title(hit[1])
        elif seg.result is not None and seg.result.ok and not ls.settings.trusted:
            title = "🔒 Verify (trust this folder to run kernels)"
        elif seg.result is not None and seg.result.ok:
            title = f"▶ Verify and time ({ls.settings.target})"
        else:
            continue
        tip = lens_tooltip(hit[1]) if hit is not None and hit[0] == seg.text else None
        out.append(T.CodeLens(range=rng, command=T.Command(title=title, command=CMD_VERIFY, arguments=[uri, k.name],
                                                           tooltip=tip)))
        if seg.result is not None and seg.result.ok:
            out.append(T.CodeLens(range=rng, command=T.Command(title="💡 Suggest optimization", command=CMD_SUGGEST,
                                                               arguments=[uri, k.name])))
            if device is not None:
                dhit = st.device_evaluations.get(k.name)
                out.append(T.CodeLens(range=rng, command=T.Command(
                    title=device_lens_title(device, st, seg.text, k.name), command=CMD_RUN_DEVICE,
                    arguments=[uri, k.name], tooltip=lens_tooltip(dhit[1]) if dhit and dhit[0] == seg.text else None)))
    return out


def action_title(title: str, numerics: str) -> str:
    """A strategy action's title with what kind of guarantee applying it carries
    (:func:`leirc.ide.inline.guarantee`): "Apply loop tiling (…) · proven: bitwise"."""
    g = guarantee(numerics)
    return f"{title} · {g}" if g else title


def device_lens_title(device: dict, st: DocState, text: str, kernel: str) -> str:
    """"▶ Run on GPU (...)", "⏳ running on GPU (...)…", then its outcome for this text."""
    if f"{kernel}@device" in st.running:
        return f"⏳ running on {device['label']}…"
    hit = st.device_evaluations.get(kernel)
    if hit is not None and hit[0] == text and hit[1].get("device") == device["label"]:
        return f"{device['label'].split(' (')[0]}: {lens_title(hit[1])}"
    return f"▶ Run on {device['label']}"


@server.command(CMD_VERIFY)
async def cmd_verify(ls: LeircServer, uri: str, kernel: str):
    """Verify the kernel against the interpreter and time it (in the background);
    answers at once, the result arrives on the lens and as a diagnostic."""
    if not ls.settings.trusted:
        return {"started": False, "error": UNTRUSTED}
    ls.spawn(ls.evaluate(uri, kernel, None, "the interpreter"))
    return {"started": True}


@server.command(CMD_RUN_DEVICE)
async def cmd_run_device(ls: LeircServer, uri: str, kernel: str):
    """Verify and time the kernel on the settings' device (an RPC tracker's server, or this
    machine's GPU) in the background; the result arrives on the kernel's device lens."""
    try:
        device = ls.settings.device()
    except ValueError as e:
        return {"started": False, "error": str(e)}
    if device is None and not ls.settings.trusted:
        return {"started": False, "error": UNTRUSTED}
    if device is None:
        return {"started": False, "error": "no device: set rpcTracker and rpcKey, or run on a machine with a GPU"}
    if device.get("rpc"):
        # seconds, not the engine's minute of retries: a refused connection, an unknown key
        # and no answer are told apart before anything is built
        probe = await asyncio.get_running_loop().run_in_executor(None, probe_tracker, device["rpc"]["tracker"],
                                                                 device["rpc"]["key"])
        ls.note_probe(probe)
        if not probe.ok and probe.kind != "busy":
            st = ls.docs.get(uri)
            doc = await ls.document(uri)
            seg = doc.segment_of(kernel) if doc is not None else None
            if st is not None and seg is not None:
                st.device_evaluations[kernel] = (seg.text, {"ok": False, "error_kind": "rpc", "error": probe.message,
                                                            "detail": probe.message, "device": device["label"],
                                                            "rpc_problem": probe.kind})
                ls._refresh_lenses()
            return {"started": False, "error": probe.message, "problem": probe.kind, "device": device["label"]}
    ls.spawn(ls.evaluate(uri, kernel, None, "the interpreter", device=device))
    return {"started": True, "device": device["label"]}


@server.command(CMD_VERIFY_REWRITE)
async def cmd_verify_rewrite(ls: LeircServer, uri: str, kernel: str, reference: Optional[str] = None,
                             strategy: Optional[str] = None):
    """After a strategy edit: verify the new kernel against its previous version (and
    remember the step's direction: the memory ranks what follows it)."""
    ls.note_applied(uri, kernel, strategy)
    if not ls.settings.trusted:
        return {"started": False, "error": UNTRUSTED}
    ls.spawn(ls.evaluate(uri, kernel, reference, "the previous version", strategy=strategy))
    return {"started": True}


@server.command(CMD_SUGGEST)
async def cmd_suggest(ls: LeircServer, uri: str, kernel: str):
    """Ranked suggestions for a kernel (the search's ranking: cost model + HTAM memory, or
    the LLM endpoint when one is configured), with work-done progress and cancellation:
    a cancelled request answers at once, the ranking finishes in its own thread."""
    doc = await ls.document(uri)
    if doc is None:
        return {"suggestions": [], "cancelled": False, "error": "document not open"}
    token = None
    progress = ls.client_capabilities.window is not None and ls.client_capabilities.window.work_done_progress
    if progress:
        token = f"leirc-suggest-{next(_TOKENS)}-{kernel}"
        await ls.work_done_progress.create_async(token)
        ls.work_done_progress.begin(token, T.WorkDoneProgressBegin(title=f"Suggesting optimizations for {kernel}",
                                                                   cancellable=True, percentage=0))

    def cancelled():
        return bool(token and token in ls.work_done_progress.tokens and ls.work_done_progress.tokens[token].cancelled())

    err, note, source, found = None, "", "", []
    try:
        llm = ls.settings.llm()
    except ValueError as e:
        llm, note = None, f"LLM not configured correctly: {e}; ranked offline"
    memory = await asyncio.get_running_loop().run_in_executor(ls.suggest_pool, ls.load_memory)
    st = ls.docs.get(uri)
    history = tuple(st.history.get(kernel, ())) if st is not None else ()
    fut = ls.suggest_pool.submit(lambda: suggestions.suggest(
        doc, kernel, ls.settings.suggestions, target=ls.settings.target, memory=memory,
        threads=ls.settings.threads, history=history, llm=llm, log=lambda m: log.info("llm: %s", m)))
    waiting = asyncio.wrap_future(fut)
    while not waiting.done() and not cancelled():
        await asyncio.wait([waiting], timeout=0.05)
    if waiting.done():
        try:
            ranking = waiting.result()
        except NotApplicable as e:
            err = str(e)
        else:
            found, source = ranking.suggestions, ranking.source
            note = "; ".join(x for x in (note, ranking.note) if x)
            if source.startswith("llm:"):
                ls.clear_fallback("model")
            elif note and (llm is not None or ls.settings.llm_base_url or ls.settings.llm_config):
                # a model was configured and did not answer: said where the user looks
                ls.set_fallback("model", f"suggestions are ranked offline (cost model): {note}",
                                "leir.llm.keyEnv" if "environment variable" in note else "leir.llm.baseUrl")
    if token:
        ls.work_done_progress.end(token, T.WorkDoneProgressEnd(
            message="cancelled" if cancelled() else f"{len(found)} suggestions ({source or 'none'})"))
    lines = Lines(doc.text)
    rows = []
    for s in found:
        row = {"title": s.title, "label": f"Suggestion: {s.title}", "rationale": s.rationale, "score": s.score,
               "predicted_speedup": s.predicted, "direction": s.direction, "step": s.step.to_json(),
               "kernel": s.kernel, "source": s.source}
        span = suggestions.anchor_span(doc, s)
        if span is not None:
            row["range"] = CONVERTER.unstructure(lines.range(span))
        rows.append(row)
    return {"suggestions": rows, "source": source, "cancelled": cancelled(),
            **({"note": note} if note else {}), **({"error": err} if err else {})}


@server.command(CMD_APPLY)
async def cmd_apply(ls: LeircServer, uri: str, kernel: str, step: dict):
    """Apply a step through ``workspace/applyEdit`` (when the client supports it)."""
    doc = await ls.document(uri)
    if doc is None:
        return {"applied": False, "error": "document not open"}
    try:
        edits = await ls.run_actions(assists.resolve, doc, kernel, Step.from_json(step))
    except (NotApplicable, ValueError) as e:
        return {"applied": False, "error": str(e)}
    caps = ls.client_capabilities.workspace
    if caps is None or not caps.apply_edit:
        return {"applied": False, "error": "the client cannot apply edits"}
    seg = doc.segment_of(kernel)
    res = await ls.workspace_apply_edit_async(T.ApplyWorkspaceEditParams(
        edit=T.WorkspaceEdit(changes={uri: to_lsp_edits(Lines(doc.text), edits)}), label=f"leirc: {step.get('strategy')}"))
    if res.applied:
        ls.note_applied(uri, kernel, step.get("strategy"))
        if ls.settings.trusted:
            ls.spawn(ls.evaluate(uri, kernel, seg.text if seg is not None else None, "the previous version",
                                 strategy=step.get("strategy")))
    return {"applied": bool(res.applied)}


@server.command(CMD_STATS)
async def cmd_stats(ls: LeircServer):
    """What this server did so far (plans made, strategy listings, the strategies that
    list slowly): for tests and for a user asking why a list is short."""
    return {"plans": assists.COUNTERS["plans"], "listings": assists.COUNTERS["listings"],
            "slow_strategies": sorted(n for n in assists.strategy_names()
                                      if assists.strategy_cost(n) > assists.SLOW_MS),
            "diagnostics": "pull" if ls.pull else "push",
            "analyses": ANALYSES[0]}


# ---------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="leirc lsp", description="The LEIR language server (stdio by default).")
    ap.add_argument("--stdio", action="store_true", help="talk over stdin/stdout (the default; editors pass it)")
    ap.add_argument("--tcp", type=int, metavar="PORT", help="listen on 127.0.0.1:PORT instead")
    ap.add_argument("--host", default="127.0.0.1", help="address for --tcp (default 127.0.0.1)")
    ap.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    args = ap.parse_args(argv)
    # before anything starts a process or imports lazily: the folder the editor opened
    # (often this process's start directory) must never be on an import path
    isolate()
    logging.basicConfig(level=args.log_level, stream=sys.stderr, format="leirc-lsp %(levelname)s: %(message)s")
    if args.tcp is not None:
        server.start_tcp(args.host, args.tcp)
    else:
        server.start_io()
    return 0
