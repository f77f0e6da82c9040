"""The LEIR language server (``leirc lsp``, ``python -m leirc_lsp``): a thin pygls layer
over :mod:`leirc.ide`. Handlers convert LSP positions and delegate; :mod:`.positions`
is the one place that maps spans to LSP ranges (UTF-16)."""

__version__ = "0.1.0"
