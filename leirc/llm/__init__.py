"""The LLM layer: an OpenAI-compatible client, its prompt cache and configuration.

Sits above ``engine`` and below ``search``. The ``openai`` package is the optional
``leirc[llm]`` extra; it is imported only when a client first talks to an endpoint, so this
package imports (and an offline replay from the cache runs) without it.
"""

from .client import Completion, LLMClient, Usage
from .config import LLMConfig, LLMError, config_from, load_config

__all__ = ["Completion", "LLMClient", "LLMConfig", "LLMError", "Usage", "config_from", "load_config"]
