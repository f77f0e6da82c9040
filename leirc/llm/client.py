"""The client for any OpenAI-compatible chat endpoint (vLLM, Ollama, llama.cpp, hosted APIs).

Built on the real ``openai`` package, imported lazily (it is the optional ``leirc[llm]``
extra), with its own retries turned off: leirc retries itself so every retry is counted,
logged, seeded (full jitter from ``random.Random(seed)``) and honours ``Retry-After``.

The API key is read once from the environment variable the configuration names. It never
reaches a log line, an exception message, ``repr``, the cache or a trace: every string that
leaves this module passes through one redactor, which also catches a server that echoes the
``Authorization`` header back in an error body. Exceptions are re-raised as ``LLMError``
outside the ``except`` block, so no chained exception carries the original message.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import email.utils
import json
import math
import os
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from .cache import CacheError, PromptCache, cache_key
from .config import LLMConfig, LLMError

__all__ = ["Completion", "LLMClient", "LLMError", "Usage", "PLACEHOLDER_KEY"]

# local servers ignore the key but the openai package insists on one
PLACEHOLDER_KEY = "unused"

BACKOFF_BASE = 0.5
BACKOFF_CAP = 8.0
RETRY_AFTER_CAP = 30.0

MISSING_PACKAGE = "the LLM client needs the openai package: pip install 'leirc[llm]'"


@dataclass(frozen=True)
class Completion:
    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cached: bool
    seconds: float
    attempts: int
    truncated: bool = False
    estimated: bool = False  # token counts guessed (len/4): the server reported no usage
    reasks: int = 0  # answers refused by the caller's check before this one (each re-asked)
    refusals: tuple = ()  # their reasons, in order


def _bucket() -> dict:
    return {"calls": 0, "cached_calls": 0, "failed_calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
            "estimated_calls": 0}


@dataclass
class Usage:
    """Call and token accounting of one client (thread-safe).

    ``calls`` counts every ``chat`` call whatever its outcome; ``cached_calls`` and
    ``failed_calls`` are subsets of it. Tokens include cached answers (their stored counts):
    they measure the prompts a search used, not a bill. ``estimated_calls`` counts answers
    whose tokens were guessed because the server sent no usage."""

    calls: int = 0
    cached_calls: int = 0
    failed_calls: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated_calls: int = 0
    retry_wait_seconds: float = 0.0
    reasks: int = 0  # questions asked again after a refused answer
    refusals: dict = field(default_factory=dict)  # reason -> answers refused (and re-asked for)
    by_model: dict = field(default_factory=dict)
    by_purpose: dict = field(default_factory=dict)

    def __post_init__(self):
        # not a field: asdict/replace/== see only the numbers
        self._lock = threading.Lock()

    def _buckets(self, model: str, purpose: str):
        return (self.by_model.setdefault(model, _bucket()), self.by_purpose.setdefault(purpose, _bucket()))

    def record_answer(self, model: str, purpose: str, c: Completion) -> None:
        with self._lock:
            self.calls += 1
            self.cached_calls += c.cached
            self.prompt_tokens += c.prompt_tokens
            self.completion_tokens += c.completion_tokens
            self.estimated_calls += c.estimated
            for b in self._buckets(model, purpose):
                b["calls"] += 1
                b["cached_calls"] += c.cached
                b["prompt_tokens"] += c.prompt_tokens
                b["completion_tokens"] += c.completion_tokens
                b["estimated_calls"] += c.estimated

    def record_failure(self, model: str, purpose: str) -> None:
        with self._lock:
            self.calls += 1
            self.failed_calls += 1
            for b in self._buckets(model, purpose):
                b["calls"] += 1
                b["failed_calls"] += 1

    def record_refusal(self, model: str, purpose: str, reason: str) -> None:
        """An answer the caller's check refused, and re-asked for."""
        with self._lock:
            self.reasks += 1
            self.refusals[reason] = self.refusals.get(reason, 0) + 1
            for b in self._buckets(model, purpose):
                b["refused"] = b.get("refused", 0) + 1

    def record_retry(self, wait: float) -> None:
        with self._lock:
            self.retries += 1
            self.retry_wait_seconds += wait

    def to_json(self) -> dict:
        with self._lock:
            return {"calls": self.calls, "cached_calls": self.cached_calls, "failed_calls": self.failed_calls,
                    "retries": self.retries, "prompt_tokens": self.prompt_tokens,
                    "completion_tokens": self.completion_tokens, "estimated_calls": self.estimated_calls,
                    "retry_wait_seconds": round(self.retry_wait_seconds, 3),
                    "reasks": self.reasks, "refusals": dict(sorted(self.refusals.items())),
                    "by_model": {k: dict(v) for k, v in sorted(self.by_model.items())},
                    "by_purpose": {k: dict(v) for k, v in sorted(self.by_purpose.items())}}


class _Retry(Exception):
    """An attempt failed in a way worth retrying (internal: never leaves this module)."""

    def __init__(self, error: LLMError, retry_after: Optional[float] = None):
        self.error, self.retry_after = error, retry_after


def _estimate_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4)) if text else 0


def _retry_after(headers) -> Optional[float]:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date); None if absent or bad."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            v = float(ms) / 1000
            return v if math.isfinite(v) and v >= 0 else None
        ra = headers.get("retry-after")
        if ra is None:
            return None
        try:
            v = float(ra)
            return v if math.isfinite(v) and v >= 0 else None
        except ValueError:
            when = email.utils.parsedate_to_datetime(ra)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


class LLMClient:
    """Chat completions with retries, a concurrency limit, a prompt cache and accounting.

    ``backoff_base``/``backoff_cap`` (seconds) shape the exponential backoff
    (``uniform(0, min(cap, base * 2**retry))``, full jitter); ``retry_after_cap`` bounds how
    long a server's ``Retry-After`` may make us wait. Tests pass small values."""

    def __init__(self, config: LLMConfig, *, log: Optional[Callable[[str], None]] = None,
                 backoff_base: float = BACKOFF_BASE, backoff_cap: float = BACKOFF_CAP,
                 retry_after_cap: float = RETRY_AFTER_CAP):
        self.config = config
        self.usage = Usage()
        self.backoff_base, self.backoff_cap, self.retry_after_cap = backoff_base, backoff_cap, retry_after_cap
        self._log_sink = log
        self._secrets: tuple[str, ...] = ()
        self._key = PLACEHOLDER_KEY
        if config.key_env is not None:
            key = os.environ.get(config.key_env)
            if key:
                self._key = key
                # also as it appears inside a JSON string, for a server that echoes headers as JSON
                self._secrets = tuple(dict.fromkeys((key, json.dumps(key)[1:-1])))
            elif not config.offline:  # an offline replay needs no key
                raise LLMError("auth", f"the environment variable {config.key_env} (key_env) is "
                                       f"{'empty' if key == '' else 'not set'}: export it with the API key")
        # separate streams so the number of retries never changes which model an ensemble picks
        self._ensemble_rng = random.Random(f"leirc-llm-ensemble:{config.seed}")
        self._jitter_rng = random.Random(f"leirc-llm-jitter:{config.seed}")
        self._rng_lock = threading.Lock()
        self._round_robin = 0
        self._slots = threading.BoundedSemaphore(config.concurrency)
        self._openai_module = None
        self._openai = None
        self._openai_lock = threading.Lock()
        if not config.offline:
            self._openai_module = self._import_openai()
        self._cache = self._open_cache() if config.cache else None
        self._closed = False

    def _open_cache(self) -> PromptCache:
        path = self.config.cache
        if self.config.offline and not os.path.exists(path):
            raise LLMError("config", f"offline mode answers from the cache, but {path} does not exist")
        try:
            return PromptCache(path, log=self._log)
        except CacheError as e:
            raise LLMError("config", str(e)) from None

    # -- secrets -----------------------------------------------------------------------------
    def redact(self, text: str) -> str:
        for s in self._secrets:
            text = text.replace(f"Bearer {s}", "Bearer ***").replace(s, "***")
        return text

    def _log(self, message: str) -> None:
        if self._log_sink is not None:
            self._log_sink(self.redact(message))

    def _error(self, kind: str, message: str, **kw) -> LLMError:
        return LLMError(kind, self.redact(message), **kw)

    def __repr__(self) -> str:
        c = self.config
        return (f"LLMClient(base_url={c.base_url!r}, models={list(c.models)!r}, key_env={c.key_env!r}, "
                f"offline={c.offline!r}, cache={c.cache!r})")

    # -- the openai package -------------------------------------------------------------------
    @staticmethod
    def _import_openai():
        try:
            import openai
        except ImportError:
            raise LLMError("missing_package", MISSING_PACKAGE) from None
        return openai

    def _sdk(self):
        with self._openai_lock:
            if self._openai is None:
                if self._openai_module is None:
                    self._openai_module = self._import_openai()
                self._openai = self._openai_module.OpenAI(base_url=self.config.base_url, api_key=self._key,
                                                          timeout=self.config.timeout, max_retries=0)
            return self._openai

    # -- model choice ---------------------------------------------------------------------------
    def pick_model(self) -> str:
        models = self.config.models
        if len(models) == 1:
            return models[0]
        with self._rng_lock:
            if self.config.weights is None:
                m = models[self._round_robin % len(models)]
                self._round_robin += 1
                return m
            return self._ensemble_rng.choices(models, weights=self.config.weights)[0]

    # -- chat -----------------------------------------------------------------------------------
    def chat(self, messages: list[dict], *, model: Optional[str] = None, purpose: str = "",
             check: Optional[Callable[[str], object]] = None) -> Completion:
        """One answer. With ``check`` (raises :class:`leirc.llm.parse.Rejected` for an answer
        the caller cannot use: prose, malformed JSON, the wrong shape; see
        :func:`leirc.llm.reask.answer_check`), a refused answer is followed by up to
        ``config.reasks`` new questions, each the conversation so far plus the model's answer
        and the reason it was refused, as Step-TP and Autocomp re-sample. Every refusal is
        counted (``usage.refusals``) and logged; the answer returned is the first accepted
        one, else the last one (the caller refuses it as before). An endpoint failure
        (after the HTTP retries) raises as before: a re-ask would hit the same failure."""
        from .reask import Rejected, feedback_messages

        done = self._chat_once(messages, model=model, purpose=purpose)
        if check is None:
            return done
        refusals: list[str] = []
        for n in range(self.config.reasks + 1):
            try:
                check(done.text)
            except Rejected as e:
                if n == self.config.reasks:
                    break
                refusals.append(e.reason)
                self.usage.record_refusal(done.model, purpose, e.reason)
                self._log(f"llm: {done.model}{_for(purpose)}: answer refused ({e.reason}"
                          f"{': ' + e.detail.splitlines()[0][:160] if e.detail else ''}); re-asking with the reason "
                          f"({n + 1}/{self.config.reasks})")
                messages = feedback_messages(messages, done.text, e)
                done = self._chat_once(messages, model=done.model, purpose=purpose)
                continue
            break
        return done if not refusals else dataclasses.replace(done, reasks=len(refusals), refusals=tuple(refusals))

    def _chat_once(self, messages: list[dict], *, model: Optional[str] = None, purpose: str = "") -> Completion:
        if self._closed:
            raise RuntimeError("this LLMClient is closed")
        _check_messages(messages)
        model = model or self.pick_model()
        c = self.config
        start = time.monotonic()
        key = cache_key(model, messages, c.temperature, c.max_tokens, c.seed)
        if self._cache is not None and c.cache_mode == "use":
            hit = self._cache.get(key)
            if hit is not None:
                done = Completion(hit.text, model, hit.prompt_tokens, hit.completion_tokens, cached=True,
                                  seconds=time.monotonic() - start, attempts=0, truncated=hit.truncated,
                                  estimated=hit.estimated)
                self.usage.record_answer(model, purpose, done)
                # said every time: a bad answer in the cache would otherwise replay unnoticed
                self._log(f"llm: {model}{_for(purpose)}: answer from the cache {c.cache} (key {key[:12]}; "
                          "cache_mode = \"refresh\" asks the endpoint again)")
                return done
        if c.offline:
            self.usage.record_failure(model, purpose)
            raise self._error("cache_miss", f"offline: no cached answer from {model} for this prompt "
                                            f"(key {key[:12]}) in {c.cache}")
        try:
            text, pt, ct, truncated, estimated, attempts = self._with_retries(model, messages, purpose)
        except LLMError:
            self.usage.record_failure(model, purpose)
            raise
        done = Completion(text, model, pt, ct, cached=False, seconds=time.monotonic() - start, attempts=attempts,
                          truncated=truncated, estimated=estimated)
        if self._cache is not None:
            self._cache.put(key, model=model, messages=messages, temperature=c.temperature, max_tokens=c.max_tokens,
                            seed=c.seed, text=text, prompt_tokens=pt, completion_tokens=ct, truncated=truncated,
                            estimated=estimated)
        self.usage.record_answer(model, purpose, done)
        return done

    def chat_many(self, requests: list[tuple[list[dict], Optional[str], str]], *,
                  check_for: Optional[Callable[[str], Optional[Callable[[str], object]]]] = None) -> list:
        """Each ``(messages, model, purpose)`` answered, in order: a Completion or the LLMError it
        raised. ``check_for(purpose)`` gives each request's ``check`` (see :meth:`chat`)."""
        if not requests:
            return []
        # models are chosen here, in request order, so an ensemble's picks do not depend on thread timing
        jobs = [(msgs, model or self.pick_model(), purpose) for msgs, model, purpose in requests]

        def one(job):
            msgs, model, purpose = job
            try:
                return self.chat(msgs, model=model, purpose=purpose,
                                 check=check_for(purpose) if check_for is not None else None)
            except LLMError as e:
                return e

        workers = min(self.config.concurrency, len(jobs))
        with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="leirc-llm") as pool:
            return list(pool.map(one, jobs))

    def _with_retries(self, model: str, messages: list[dict], purpose: str):
        attempts_allowed = self.config.max_retries + 1
        for attempt in range(1, attempts_allowed + 1):
            with self._slots:
                outcome = self._attempt(model, messages)
            if not isinstance(outcome, _Retry):
                if isinstance(outcome, LLMError):
                    outcome.attempts = attempt
                    self._log(f"llm: {model}{_for(purpose)}: {outcome.kind}: {outcome} (not retried)")
                    raise outcome
                return (*outcome, attempt)
            err = outcome.error
            if attempt == attempts_allowed:
                final = self._error(err.kind, f"{err.message} (gave up after {attempt} attempt"
                                              f"{'s' if attempt > 1 else ''})", status=err.status, attempts=attempt)
                self._log(f"llm: {model}{_for(purpose)}: {final}")
                raise final
            wait = self._wait(attempt, outcome.retry_after)
            self.usage.record_retry(wait)
            self._log(f"llm: {model}{_for(purpose)}: attempt {attempt}/{attempts_allowed} failed "
                      f"({err.kind}: {err.message}); retrying in {wait:.2f} s")
            time.sleep(wait)
        raise AssertionError("unreachable")

    def _wait(self, attempt: int, retry_after: Optional[float]) -> float:
        if retry_after is not None:
            return min(retry_after, self.retry_after_cap)
        with self._rng_lock:
            return self._jitter_rng.uniform(0, min(self.backoff_cap, self.backoff_base * 2 ** (attempt - 1)))

    def _attempt(self, model: str, messages: list[dict]):
        """One HTTP request: the answer tuple, an LLMError (final) or a _Retry.

        Exceptions are turned into values here and raised by the caller, outside any
        ``except`` block, so the openai exception (whose message may hold an echoed key)
        is not chained onto the LLMError."""
        sdk = self._sdk()
        openai = self._openai_module
        import httpx  # a dependency of openai: stream errors surface as raw httpx exceptions

        c = self.config
        try:
            if c.stream:
                return self._streamed(sdk, model, messages)
            response = sdk.chat.completions.create(model=model, messages=messages, temperature=c.temperature,
                                                   max_tokens=c.max_tokens, seed=c.seed, stream=False)
            return self._parsed(response)
        except openai.APITimeoutError:
            return _Retry(self._error("timeout", f"no answer within {c.timeout:g} s from {c.base_url}"))
        except openai.APIConnectionError as e:
            return _Retry(self._error("connection", f"cannot reach {c.base_url}: {_cause(e)}"))
        except openai.APIStatusError as e:
            return self._status_error(e)
        except openai.APIResponseValidationError as e:
            return self._error("bad_response", f"the endpoint's answer does not fit the API: {e}")
        except openai.APIError as e:  # e.g. an error event inside a stream
            return self._error("server", f"the endpoint reported an error: {e}")
        except httpx.TimeoutException:
            return _Retry(self._error("timeout", f"the answer stalled for over {c.timeout:g} s"))
        except httpx.TransportError as e:
            return _Retry(self._error("connection", f"the connection broke mid-answer: {type(e).__name__}"))
        except ValueError as e:  # JSON decoding of a malformed body
            return self._error("bad_response", f"malformed answer from {c.base_url}: {e}")

    def _status_error(self, e):
        status = e.status_code
        detail = _error_detail(e)
        if status == 429:
            return _Retry(self._error("rate_limited", f"HTTP 429 rate limited: {detail}", status=status),
                          _retry_after(e.response.headers))
        if status >= 500:
            return _Retry(self._error("server", f"HTTP {status}: {detail}", status=status),
                          _retry_after(e.response.headers))
        if status in (401, 403):
            hint = f" (check {self.config.key_env})" if self.config.key_env else " (set key_env to send an API key)"
            return self._error("auth", f"HTTP {status}: {detail}{hint}", status=status)
        return self._error("bad_request", f"HTTP {status}: {detail}", status=status)

    def _parsed(self, response):
        try:
            choice = response.choices[0]
            text = choice.message.content
            if text is None:
                text = ""
            if not isinstance(text, str):
                raise TypeError(f"content is {type(text).__name__}")
        except (AttributeError, IndexError, TypeError, KeyError) as e:
            return self._error("bad_response", f"the answer has no message text ({type(e).__name__}: {e})")
        usage = getattr(response, "usage", None)
        pt = getattr(usage, "prompt_tokens", None) if usage is not None else None
        ct = getattr(usage, "completion_tokens", None) if usage is not None else None
        return self._finish(text, pt, ct)

    def _streamed(self, sdk, model, messages):
        c = self.config
        stream = sdk.chat.completions.create(model=model, messages=messages, temperature=c.temperature,
                                             max_tokens=c.max_tokens, seed=c.seed, stream=True,
                                             stream_options={"include_usage": True})
        parts: list[str] = []
        size = 0
        pt = ct = None
        cut = False
        # the timeout bounds the whole request, as it does for a non-streamed answer (whose
        # first byte comes only when the text is complete), not just each gap between chunks
        deadline = time.monotonic() + c.timeout
        try:
            for chunk in stream:
                if time.monotonic() > deadline:
                    return _Retry(self._error("timeout", f"the streamed answer took over {c.timeout:g} s"))
                usage = getattr(chunk, "usage", None)
                if usage is not None:
                    pt, ct = usage.prompt_tokens, usage.completion_tokens
                for choice in getattr(chunk, "choices", None) or ():
                    delta = getattr(choice, "delta", None)
                    piece = getattr(delta, "content", None) if delta is not None else None
                    if piece:
                        parts.append(piece)
                        size += len(piece)
                if size > c.max_response_chars:
                    cut = True  # stop reading: the rest would be thrown away anyway
                    break
        finally:
            stream.close()
        text = "".join(parts)
        return self._finish(text, pt, ct, cut=cut)

    def _finish(self, text, pt, ct, *, cut=False):
        limit = self.config.max_response_chars
        truncated = cut or len(text) > limit
        if truncated:
            text = text[:limit]
        estimated = not isinstance(pt, int) or not isinstance(ct, int)
        if estimated:
            # the prompt size is unknown here; a completion estimate is better than nothing
            pt = pt if isinstance(pt, int) else 0
            ct = ct if isinstance(ct, int) else _estimate_tokens(text)
        return text, pt, ct, truncated, estimated

    def close(self) -> None:
        self._closed = True
        with self._openai_lock:
            if self._openai is not None:
                self._openai.close()
                self._openai = None
        if self._cache is not None:
            self._cache.close()

    def __enter__(self) -> "LLMClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _for(purpose: str) -> str:
    return f" [{purpose}]" if purpose else ""


def _cause(e: BaseException) -> str:
    inner = e.__cause__ or e.__context__
    return f"{type(inner).__name__}: {inner}" if inner is not None else str(e)


def _error_detail(e) -> str:
    """The server's own message when its body has the OpenAI error shape, else its text (shortened)."""
    body = getattr(e, "body", None)
    msg = None
    if isinstance(body, dict):
        err = body.get("error", body)
        msg = err.get("message") if isinstance(err, dict) else err
    if not isinstance(msg, str) or not msg:
        try:
            msg = e.response.text
        except Exception:  # a body that cannot be read is not worth a second failure
            msg = str(e)
    return msg if len(msg) <= 500 else msg[:500] + "…"


def _check_messages(messages) -> None:
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list of {'role', 'content'} dicts")
    for m in messages:
        if (not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant")
                or not isinstance(m.get("content"), str)):
            raise ValueError(f"bad chat message {m!r}: need role system|user|assistant and string content")
