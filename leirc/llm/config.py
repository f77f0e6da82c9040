"""How leirc talks to an LLM endpoint: one frozen, validated configuration.

A configuration comes from a TOML or JSON file, from command-line values, or both (the
command line wins). It never holds an API key: ``key_env`` is the *name* of the environment
variable that does, so a configuration can be printed, logged, written into a search's trace
and shared without leaking anything.

``LLMError`` lives here, the lowest module of the package, because configuration errors are
LLM errors too; ``leirc.llm.client`` re-exports it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import urlparse

MODES = ("steptp", "autocomp", "htam")
CACHE_MODES = ("use", "refresh")

ERROR_KINDS = ("timeout", "rate_limited", "server", "connection", "auth", "bad_request", "bad_response",
               "cache_miss", "config", "missing_package")


class LLMError(Exception):
    """A failure of the LLM layer, with a stable ``kind`` (one of ``ERROR_KINDS``).

    The message is meant for a user as it is (no traceback needed). The client builds every
    message through its redactor, so an API key never appears in one, even when a server
    echoes the Authorization header back."""

    def __init__(self, kind: str, message: str = "", *, file: Optional[str] = None, line: Optional[int] = None,
                 column: Optional[int] = None, status: Optional[int] = None, attempts: int = 0):
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown LLMError kind {kind!r}")
        self.kind = kind
        self.message = message or kind
        self.file, self.line, self.column = file, line, column
        self.status = status
        self.attempts = attempts
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.file:
            where = self.file
            if self.line is not None:
                where += f":{self.line}"
                if self.column is not None:
                    where += f":{self.column}"
            where += ": "
        return f"{where}{self.message}"

    def __str__(self) -> str:
        return self._render()

    def __repr__(self) -> str:
        return f"LLMError(kind={self.kind!r}, message={self._render()!r})"

    def to_json(self) -> dict:
        return {"kind": self.kind, "message": self._render(), "status": self.status, "attempts": self.attempts}


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class LLMConfig:
    base_url: str
    models: tuple[str, ...]
    weights: Optional[tuple[float, ...]] = None
    key_env: Optional[str] = None
    timeout: float = 60.0
    max_retries: int = 4
    concurrency: int = 4
    temperature: float = 0.0
    max_tokens: int = 2048
    max_response_chars: int = 200_000
    stream: bool = False
    cache: Optional[str] = None
    offline: bool = False
    seed: int = 0
    mode: str = "steptp"
    #: how many times a caller that checks answers (``chat(check=...)``) re-asks after an
    #: answer it refused, each time telling the model why (0: never)
    reasks: int = 2
    #: "use": answer from the cache when it has the prompt; "refresh": always ask the endpoint
    #: (and store its answers), so a bad cached answer is not replayed
    cache_mode: str = "use"

    def __post_init__(self):
        # normalise sequences so a config built from JSON lists equals one built from tuples
        if isinstance(self.models, str):
            object.__setattr__(self, "models", _split_names(self.models))
        else:
            object.__setattr__(self, "models", tuple(self.models))
        if self.weights is not None:
            object.__setattr__(self, "weights", tuple(float(w) for w in self.weights))
        _validate(self)

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["models"] = list(self.models)
        d["weights"] = None if self.weights is None else list(self.weights)
        return d

    @classmethod
    def from_json(cls, d: dict) -> "LLMConfig":
        if not isinstance(d, dict):
            raise LLMError("config", f"an LLM configuration is a JSON object, not {type(d).__name__}")
        unknown = sorted(set(d) - FIELDS)
        if unknown:
            raise LLMError("config", f"unknown LLM configuration field(s): {', '.join(unknown)}")
        return _build({k: v for k, v in d.items()})

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.to_json().items())
        return f"LLMConfig({fields})"


FIELDS = frozenset(f.name for f in dataclasses.fields(LLMConfig))
_REQUIRED = ("base_url", "models")


def _validate(c: LLMConfig) -> None:
    def bad(msg: str):
        raise LLMError("config", msg)

    if not isinstance(c.base_url, str):
        bad("base_url must be a string")
    u = urlparse(c.base_url)
    if u.scheme not in ("http", "https") or not u.netloc:
        bad(f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1, got {c.base_url!r}")
    if not c.models:
        bad("at least one model is needed (models = [\"name\"] or --llm-model NAME)")
    for m in c.models:
        if not isinstance(m, str) or not m.strip():
            bad(f"model names must be non-empty strings, got {m!r}")
    if c.weights is not None:
        if len(c.weights) != len(c.models):
            bad(f"{len(c.weights)} weight(s) for {len(c.models)} model(s): give one weight per model")
        if not all(math.isfinite(w) and w > 0 for w in c.weights):
            bad("ensemble weights must be positive finite numbers")
    if c.key_env is not None and (not isinstance(c.key_env, str) or not _ENV_NAME.match(c.key_env)):
        # the value is not echoed: a user who pasted the key itself here must not see it printed
        bad("key_env must be the NAME of an environment variable (letters, digits, _), not a key")
    _number(c, "timeout", float, lambda x: x > 0, "a positive number of seconds")
    _number(c, "max_retries", int, lambda x: x >= 0, "an integer >= 0")
    _number(c, "concurrency", int, lambda x: x >= 1, "an integer >= 1")
    _number(c, "temperature", float, lambda x: 0 <= x <= 2, "a number in [0, 2]")
    _number(c, "max_tokens", int, lambda x: x >= 1, "an integer >= 1")
    _number(c, "max_response_chars", int, lambda x: x >= 1, "an integer >= 1")
    _number(c, "seed", int, lambda x: True, "an integer")
    _number(c, "reasks", int, lambda x: x >= 0, "an integer >= 0")
    if c.cache_mode not in CACHE_MODES:
        bad(f"cache_mode must be one of {', '.join(CACHE_MODES)}, got {c.cache_mode!r}")
    if c.offline and c.cache_mode == "refresh":
        bad("offline mode answers only from the cache: it cannot refresh it (cache_mode = \"refresh\")")
    for name in ("stream", "offline"):
        if not isinstance(getattr(c, name), bool):
            bad(f"{name} must be true or false, got {getattr(c, name)!r}")
    if c.cache is not None and (not isinstance(c.cache, str) or not c.cache):
        bad("cache must be a file path")
    if c.offline and c.cache is None:
        bad("offline mode answers only from the cache: give a cache file")
    if c.mode not in MODES:
        bad(f"mode must be one of {', '.join(MODES)}, got {c.mode!r}")


def _number(c: LLMConfig, name: str, kind: type, ok, what: str) -> None:
    v = getattr(c, name)
    fine = (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            and (kind is float or isinstance(v, int)))
    if not fine or not ok(v):
        raise LLMError("config", f"{name} must be {what}, got {v!r}")


def _split_names(s: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in s.split(",") if p.strip())


def _coerce(name: str, value: Any) -> Any:
    """Values from a command line arrive as strings: turn them into the field's type."""
    if name == "models":
        if isinstance(value, str):
            return _split_names(value)
        if isinstance(value, (list, tuple)):
            return tuple(value)
        return value
    if name == "weights":
        if isinstance(value, str):
            try:
                return tuple(float(p) for p in value.split(",") if p.strip())
            except ValueError:
                raise LLMError("config", f"weights must be numbers separated by commas, got {value!r}") from None
        if isinstance(value, (list, tuple)):
            if not all(isinstance(w, (int, float)) and not isinstance(w, bool) for w in value):
                raise LLMError("config", f"weights must be numbers, got {list(value)!r}")
            return tuple(float(w) for w in value)
        return value
    if not isinstance(value, str):
        return value
    if name in ("timeout", "temperature"):
        try:
            return float(value)
        except ValueError:
            raise LLMError("config", f"{name} must be a number, got {value!r}") from None
    if name in ("max_retries", "concurrency", "max_tokens", "max_response_chars", "seed", "reasks"):
        try:
            return int(value)
        except ValueError:
            raise LLMError("config", f"{name} must be an integer, got {value!r}") from None
    if name in ("stream", "offline"):
        low = value.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise LLMError("config", f"{name} must be true or false, got {value!r}")
    return value


def _build(values: dict) -> LLMConfig:
    values = {k: _coerce(k, v) for k, v in values.items()}
    missing = [k for k in _REQUIRED if not values.get(k)]
    if missing:
        hints = {"base_url": "--llm-base-url URL or base_url in the config file",
                 "models": "--llm-model NAME or models in the config file"}
        raise LLMError("config", "; ".join(f"no {k} given ({hints[k]})" for k in missing))
    return LLMConfig(**values)


_TOML_POS = re.compile(r"\(at line (\d+), column (\d+)\)")


def load_config(path) -> dict:
    """Read a TOML (``.toml``) or JSON (anything else that parses as JSON) config file.

    The fields may sit at the top level or in an ``[llm]`` table. Returns the raw dict of
    fields; ``config_from`` validates it. Errors name the file and, when known, the line."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise LLMError("config", f"cannot read the LLM config file: {e.strerror or e}", file=path) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LLMError("config", f"not UTF-8 text (byte {e.start})", file=path) from None
    if path.lower().endswith(".toml"):
        import tomllib

        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            msg = str(e)
            m = _TOML_POS.search(msg)
            line, col = (int(m.group(1)), int(m.group(2))) if m else (None, None)
            raise LLMError("config", f"invalid TOML: {_TOML_POS.sub('', msg).strip()}", file=path,
                           line=line, column=col) from None
    else:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as e:
            raise LLMError("config", f"invalid JSON: {e.msg}", file=path, line=e.lineno, column=e.colno) from None
    if not isinstance(raw, dict):
        raise LLMError("config", "the config file must hold a table/object of LLM settings", file=path)
    section = raw.get("llm") if isinstance(raw.get("llm"), dict) else raw
    unknown = sorted(set(section) - FIELDS - {"model"})
    if unknown:
        k = unknown[0]
        raise LLMError("config", f"unknown LLM setting {k!r} (known: {', '.join(sorted(FIELDS))})", file=path,
                       line=_line_of_key(text, k))
    out = dict(section)
    if "model" in out:  # one model is commonly written in the singular
        if "models" in out:
            raise LLMError("config", "give either model or models, not both", file=path,
                           line=_line_of_key(text, "model"))
        out["models"] = out.pop("model")
    return out


def _line_of_key(text: str, key: str) -> Optional[int]:
    pat = re.compile(rf'^\s*(?:"{re.escape(key)}"\s*:|{re.escape(key)}\s*=|"{re.escape(key)}"\s*=)')
    for i, line in enumerate(text.splitlines(), 1):
        if pat.search(line):
            return i
    return None


def config_from(args: dict, file: Optional[str] = None) -> LLMConfig:
    """The configuration from command-line values over a config file's values.

    ``args`` keys are field names, optionally prefixed ``llm_`` (argparse's ``--llm-base-url``
    becomes ``llm_base_url``); a value of None means "not given". ``model`` is accepted for
    ``models``; ``models`` may be ``"a,b"`` and ``weights`` ``"2,1"``."""
    values: dict = {}
    if file is not None:
        values.update(load_config(file))
    given: dict = {}
    for k, v in args.items():
        if v is None:
            continue
        name = k[4:] if k.startswith("llm_") else k
        if name == "model":
            name = "models"
        if name not in FIELDS:
            raise LLMError("config", f"unknown LLM setting {k!r}")
        given[name] = v
    values.update(given)
    try:
        return _build(values)
    except LLMError as e:
        if file is not None and e.file is None:
            raise LLMError("config", f"{e.message} (config file {file})") from None
        raise
