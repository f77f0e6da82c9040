"""A scripted OpenAI-compatible HTTP server for tests: real sockets, real HTTP, no mocks.

No model is reachable from the test machines, so the LLM layers are tested against this
server: the real ``openai`` client talks to it over 127.0.0.1, and each test scripts what it
answers (good text, errors, 429s with Retry-After, slow or dropped answers, malformed bodies,
huge answers). It speaks ``POST /v1/chat/completions`` (JSON, and SSE when ``"stream": true``)
and ``GET /v1/models``, and records every request — headers included — so a test can check
what the client actually sent (the Authorization header, the seed, the messages).

    from llm_server import ScriptedLLMServer, ok, rate_limited, llm_server

    def test_x(llm_server):
        llm_server.push(rate_limited(retry_after=1), ok('{"strategy": "loop_tiling"}'))
        ...  # point a client at llm_server.url
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterable, Optional

import pytest

# how many characters of text go into one SSE chunk: small enough that a short answer still
# arrives as several deltas (the client must assemble them), large enough that a huge one does
# not take thousands of writes
STREAM_CHUNK_CHARS = 64


@dataclass
class Reply:
    """One scripted answer to one chat-completions request."""

    text: str = ""
    status: int = 200
    headers: dict = field(default_factory=dict)
    delay: float = 0.0              # seconds to wait before answering (or before dropping)
    prompt_tokens: Optional[int] = None       # None: a rough count of the request's words
    completion_tokens: Optional[int] = None   # None: len(text) // 4, at least 1
    body: Optional[bytes] = None    # a raw body overrides everything (malformed JSON, HTML error pages)
    drop: bool = False              # close the connection without answering
    include_usage: bool = True      # False: a server that reports no token usage
    finish_reason: str = "stop"
    echo_headers: bool = False      # put the request's headers into the (error) body: a leaky server
    chunk_delay: float = 0.0        # streaming: seconds between SSE chunks (a slow generator)


def ok(text: str, **kw) -> Reply:
    return Reply(text=text, **kw)


def rate_limited(retry_after: float | None = 1, **kw) -> Reply:
    headers = {} if retry_after is None else {"Retry-After": _number(retry_after)}
    return Reply(text="rate limit reached", status=429, headers=headers, **kw)


def server_error(status: int = 500, text: str = "internal error", **kw) -> Reply:
    return Reply(text=text, status=status, **kw)


def slow(text: str, delay: float, **kw) -> Reply:
    return Reply(text=text, delay=delay, **kw)


def huge(n_chars: int, **kw) -> Reply:
    # not one repeated character, so a truncation at the wrong place would show
    pattern = "0123456789abcdefghijklmnopqrstuvwxyz\n"
    return Reply(text=(pattern * (n_chars // len(pattern) + 1))[:n_chars], **kw)


def raw(body: bytes, status: int = 200, content_type: str = "application/json", **kw) -> Reply:
    headers = {"Content-Type": content_type, **kw.pop("headers", {})}
    return Reply(body=body, status=status, headers=headers, **kw)


def hang(seconds: float) -> Reply:
    """Accept the request, say nothing for ``seconds``, then close the connection."""
    return Reply(delay=seconds, drop=True)


def echo_auth(status: int = 500) -> Reply:
    """An error whose body repeats the request headers, Authorization included."""
    return Reply(text="error; request headers follow", status=status, echo_headers=True)


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


class ScriptedLLMServer:
    """A ThreadingHTTPServer on 127.0.0.1 (a free port) in a daemon thread.

    Replies come from the FIFO queue (``push``), else from ``responder(request_json)`` when
    set, else from the default reply (``set_default``; initially a 500 "no scripted reply", so
    a test that sends more requests than it scripted fails loudly instead of hanging)."""

    def __init__(self, script: Optional[Iterable[Reply]] = None):
        self.requests: list[dict] = []
        self.responder: Optional[Callable[[dict], Reply]] = None
        self.max_in_flight = 0
        self._in_flight = 0
        self._queue: list[Reply] = list(script or ())
        self._default = server_error(500, "no scripted reply")
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._httpd: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None
        self.url = ""

    # -- scripting -------------------------------------------------------------------------
    def push(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def set_default(self, reply: Reply) -> None:
        with self._lock:
            self._default = reply

    @property
    def chat_requests(self) -> list[dict]:
        with self._lock:
            return [r for r in self.requests if r["path"].endswith("/chat/completions")]

    def _next_reply(self, request_json: dict) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.pop(0)
            responder, default = self.responder, self._default
        return responder(request_json) if responder is not None else default

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> "ScriptedLLMServer":
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        httpd.daemon_threads = True  # a hanging reply must not keep the test process alive
        self._httpd = httpd
        self.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="scripted-llm-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()  # wakes replies that are waiting out a delay
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "ScriptedLLMServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- answering (called from handler threads) ---------------------------------------------
    def _record(self, method: str, path: str, headers: dict, body: Optional[dict]) -> None:
        with self._lock:
            self.requests.append({"method": method, "path": path, "headers": headers, "json": body,
                                  "time": time.monotonic()})

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1


def _handler_for(server: ScriptedLLMServer):
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, and a stream ends when the connection closes
        protocol_version = "HTTP/1.0"

        def log_message(self, *args):  # keep pytest output clean
            pass

        def do_GET(self):
            headers = dict(self.headers.items())
            server._record("GET", self.path, headers, None)
            if self.path.rstrip("/").endswith("/models"):
                # the models this server "serves" are whatever the test last asked for
                names = sorted({r["json"].get("model", "") for r in server.chat_requests
                                if isinstance(r["json"], dict)} - {""}) or ["scripted"]
                self._send_json(200, {"object": "list", "data": [
                    {"id": n, "object": "model", "created": 0, "owned_by": "scripted"} for n in names]})
            else:
                self._send_error_json(404, f"no route for GET {self.path}", "not_found")

        def do_POST(self):
            headers = dict(self.headers.items())
            length = int(self.headers.get("Content-Length") or 0)
            raw_body = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw_body) if raw_body else {}
            except ValueError:
                body = None
            server._record("POST", self.path, headers, body)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send_error_json(404, f"no route for POST {self.path}", "not_found")
                return
            if not isinstance(body, dict):
                self._send_error_json(400, "request body is not a JSON object", "invalid_request_error")
                return
            server._enter()
            try:
                self._answer(body, headers, server._next_reply(body))
            finally:
                server._leave()

        def _answer(self, request: dict, headers: dict, reply: Reply) -> None:
            if reply.delay > 0 and server._stopping.wait(reply.delay):
                return
            if reply.drop:
                self._drop()
                return
            if reply.body is not None:
                self.send_response(reply.status)
                extra = {k.lower(): v for k, v in reply.headers.items()}
                extra.setdefault("content-type", "application/json")
                for k, v in extra.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
                return
            if reply.status != 200:
                message = reply.text
                if reply.echo_headers:
                    message += " " + json.dumps(headers)
                kind = "rate_limit_exceeded" if reply.status == 429 else "server_error"
                self._send_error_json(reply.status, message, kind, reply.headers)
                return
            model = request.get("model", "scripted")
            prompt_tokens = reply.prompt_tokens
            if prompt_tokens is None:
                prompt_tokens = sum(len(str(m.get("content", "")).split())
                                    for m in request.get("messages", []) if isinstance(m, dict))
            completion_tokens = reply.completion_tokens
            if completion_tokens is None:
                completion_tokens = max(1, len(reply.text) // 4)
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                     "total_tokens": prompt_tokens + completion_tokens}
            ident = f"chatcmpl-{next(server._ids)}"
            if request.get("stream"):
                want_usage = bool((request.get("stream_options") or {}).get("include_usage"))
                self._stream(ident, model, reply, usage if (want_usage and reply.include_usage) else None)
                return
            payload = {"id": ident, "object": "chat.completion", "created": int(time.time()), "model": model,
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.text},
                                    "finish_reason": reply.finish_reason}]}
            if reply.include_usage:
                payload["usage"] = usage
            self._send_json(200, payload, reply.headers)

        def _stream(self, ident: str, model: str, reply: Reply, usage: Optional[dict]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            for k, v in reply.headers.items():
                self.send_header(k, v)
            self.end_headers()
            created = int(time.time())

            def chunk(delta: dict, finish: Optional[str]) -> dict:
                return {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

            events = [chunk({"role": "assistant", "content": ""}, None)]
            events += [chunk({"content": reply.text[i:i + STREAM_CHUNK_CHARS]}, None)
                       for i in range(0, len(reply.text), STREAM_CHUNK_CHARS)]
            events.append(chunk({}, reply.finish_reason))
            if usage is not None:
                events.append({"id": ident, "object": "chat.completion.chunk", "created": created,
                               "model": model, "choices": [], "usage": usage})
            try:
                for e in events:
                    if reply.chunk_delay > 0:
                        if server._stopping.wait(reply.chunk_delay):
                            return
                        self.wfile.flush()
                    self.wfile.write(b"data: " + json.dumps(e).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client stopped reading (a truncated huge answer): not an error here

        def _send_json(self, status: int, payload: dict, headers: Optional[dict] = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _send_error_json(self, status: int, message: str, kind: str, headers: Optional[dict] = None) -> None:
            self._send_json(status, {"error": {"message": message, "type": kind, "code": status}}, headers)

        def _drop(self) -> None:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    return Handler


@pytest.fixture
def llm_server():
    with ScriptedLLMServer() as s:
        yield s
