"""Serving over HTTP, on localhost by default.

``llm_server.ChatServer`` serves any ``ragbook.llm`` chat backend over the OpenAI
chat-completions protocol (whole replies, or server-sent events): what the tests use to check
``OpenAICompatibleLLM`` against a real HTTP server, and a way to share one loaded model
between notebooks. ``guards`` holds what such a server refuses — a foreign ``Host`` or
``Origin``, more connections than its cap, a request that does not arrive in time — and the
checks of the settings that configure it.

``app`` (``ragbook serve``, ``ragbook.serve``) serves a whole pipeline — a page, ask, stream
and explain — on Starlette and uvicorn, under ``policy``'s guards and scopes; it is not
imported here, so that those libraries load only when a pipeline is served.
"""
from .llm_server import ChatServer

__all__ = ["ChatServer"]
