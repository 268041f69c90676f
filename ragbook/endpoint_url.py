"""An endpoint's address, composed and shown safely: the chat-completions URL made from a base
URL (a query such as Azure's ``?api-version=...`` stays a query, after the path), and any
text — a URL, an error, a ``repr`` — with the secrets a base URL can carry masked (a
``user:password@`` and the values of ``?key=`` / ``token=`` / ``sig=``-like parameters), and
the API key itself, so that none of them reaches an error message, a trace, a cache
namespace or a printed notebook.

>>> completions_url("https://h.example/v1/?api-version=2024-06-01")
'https://h.example/v1/chat/completions?api-version=2024-06-01'
>>> masked("http://al:pw@h:8/v1?api_key=K1&x=2")
'http://***@h:8/v1?api_key=***&x=2'
"""
from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

__all__ = ["completions_url", "masked"]

_USERINFO = re.compile(r"(?<=//)[^/?#@\s'\"]*@")
_SECRET_PARAM = re.compile(r"([?&;][^=&#\s'\"]*(?:key|token|secret|pass|auth|sig|credential)"
                           r"[^=&#\s'\"]*=)[^&#\s'\"]*", re.I)
_MIN_KEY = 8        # shorter "keys" (e.g. the "not-needed" placeholder) are not masked in text


def completions_url(base_url: str) -> str:
    """``base_url``'s path + ``/chat/completions``, its query kept and its fragment dropped."""
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/chat/completions",
                                     fragment=""))


def masked(text: str, *keys: str | None) -> str:
    """``text`` with every URL's ``user:password@`` and the values of secret-looking query
    parameters replaced by ``***``, and each of ``keys`` (an API key) wherever it occurs."""
    text = _SECRET_PARAM.sub(r"\1***", _USERINFO.sub("***@", text))
    for key in keys:
        if key and len(key) >= _MIN_KEY and key != "not-needed":
            text = text.replace(key, "***")
    return text
