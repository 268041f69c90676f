"""``ragbook serve``: a pipeline over HTTP — ask, stream (server-sent events) and explain, a
machine-readable schema, and one small page — on Starlette and uvicorn (``pip install
"ragbook[serve]"``; imported only when a server is made, so ``import ragbook`` stays light).

>>> with RagServer(Pipeline(retriever)) as server:                   # doctest: +SKIP
...     print(server.base_url)                # http://127.0.0.1:<port>/ : the page

Guards, as ``ChatServer``'s (``policy.Policy`` holds them; each refusal is JSON ``{"error":
{"message", "type"}}`` that says what to do, and echoes nothing the request sent):

- loopback by default: another ``host`` warns, since anyone who can reach the port can ask;
- ``Host`` must name this machine (or ``allowed_hosts``), else 421 (DNS rebinding);
- ``Origin``, when a browser sends one, must be loopback (or ``allowed_origins``), else 403;
- POST bodies must be ``application/json`` (415: no cross-site form), at most
  ``max_body_bytes`` (413, counted as they arrive, chunked or not), arriving within
  ``request_timeout`` (408); a request head over ``max_header_bytes`` is refused (431; a
  head arriving in pieces past twice that is cut by uvicorn's parser first: 400);
- each question must be answered within ``deadline`` seconds, else 503 (one question runs
  at a time: the models are not re-entrant, so waiting for one counts);
- ``max_connections`` (uvicorn's ``limit_concurrency``): beyond it, 503; a request head
  not in within ``header_timeout`` is 408 and closed, so idle clients cannot fill the cap.

The access scope is the server's, never the request's: one server-wide ``scope``, or one per
API key (``keys``, sent as ``Authorization: Bearer <key>``; a missing or unknown key is 401).
A request may send its own ``scope`` (``{"access": "public"}``) only to *narrow* it: asking
for a value the server's scope does not grant is 403, and nothing is searched.
"""
from __future__ import annotations

import base64
import hashlib
import json
import queue
import socket
import threading
import time
import warnings

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..commands import load_index
from ..explain import explain_result_dicts
from ..filters import matches, scoped
from ..pipeline import Pipeline
from ..tuned import load_settings
from .guards import check_positive, is_loopback
from .page import PAGE, SCRIPT
from .policy import Policy, Refused, narrow_scope
from .schema import SCHEMA

__all__ = ["build_app", "document_segments", "head_deadline", "RagServer", "serve",
           "pipeline_for"]


class _Guard:
    """ASGI middleware: every HTTP request passes ``Policy.check_head`` before any route."""

    def __init__(self, app, policy: Policy):
        self.app, self.policy = app, policy

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            try:
                self.policy.check_head(scope)
            except Refused as err:
                return await JSONResponse(err.body(), err.status)(scope, receive, send)
        await self.app(scope, receive, send)


def build_app(pipeline: Pipeline, policy: Policy | None = None) -> Starlette:
    """The ASGI app serving ``pipeline`` under ``policy`` (default: loopback, no scope):
    ``GET /`` the page, ``GET /schema`` the JSON schema, ``POST /ask``, ``POST /stream``
    (server-sent events), ``POST /explain``, ``POST /document`` (a document's text, within
    the scope, to show a citation in place)."""
    policy = policy or Policy()
    lock = threading.Lock()                   # one question at a time: models not re-entrant

    async def read_request(request: Request, field: str = "question"
                           ) -> tuple[str, dict | None]:
        body = bytearray()
        try:
            with anyio.fail_after(policy.request_timeout):
                async for chunk in request.stream():
                    body += chunk
                    if len(body) > policy.max_body_bytes:
                        raise Refused(413, f"the body is over max_body_bytes="
                                           f"{policy.max_body_bytes}; send a shorter question")
        except TimeoutError:
            raise Refused(408, f"the body did not arrive within request_timeout="
                               f"{policy.request_timeout:g} s; send it at once") from None
        fixed = policy.scope_for(request.headers.get("authorization"))
        try:
            req = json.loads(body)
        except (ValueError, RecursionError):      # RecursionError: [[[[... nested past Python
            req = None
        if not isinstance(req, dict) or not isinstance(req.get(field), str) \
                or not req[field].strip() or set(req) - {field, "scope"}:
            raise Refused(400, f"the body must be a JSON object {{\"{field}\": \"...\"}} with "
                               "an optional \"scope\" (nothing else); see GET /schema")
        return req[field], narrow_scope(fixed, req.get("scope"))

    def locked(work, until: float):
        """``work()`` under the pipeline's lock, if it frees before ``until``."""
        if not lock.acquire(timeout=max(0.0, until - time.monotonic())):
            raise TimeoutError
        try:
            return work()
        finally:
            lock.release()

    async def answer(work):
        until = time.monotonic() + policy.deadline
        try:
            with anyio.fail_after(policy.deadline):
                return await anyio.to_thread.run_sync(locked, work, until,
                                                      abandon_on_cancel=True)
        except TimeoutError:
            raise Refused(503, f"no answer within deadline={policy.deadline:g} s (the server "
                               "answers one question at a time); retry shortly",
                          "server_error") from None
        except ValueError as err:          # what the pipeline refuses (e.g. a blank question)
            raise Refused(400, f"{err}") from None

    def refusing(endpoint):
        async def run(request: Request) -> Response:
            try:
                return await endpoint(request)
            except Refused as err:
                return JSONResponse(err.body(), err.status)
        return run

    async def ask(request: Request) -> Response:
        question, scope = await read_request(request)
        result = await answer(lambda: pipeline.ask(question, scope=scope))
        return JSONResponse(result.to_dict())

    async def explain(request: Request) -> Response:
        question, scope = await read_request(request)

        def work():
            result = pipeline.ask(question, scope=scope)
            return {"result": result.to_dict(),
                    "explanations": explain_result_dicts(pipeline, result)}
        return JSONResponse(await answer(work))

    async def stream(request: Request) -> Response:
        question, scope = await read_request(request)
        events: queue.Queue = queue.Queue()
        stop = threading.Event()
        until = time.monotonic() + policy.deadline

        def produce():
            try:
                def work():
                    streamed = pipeline.stream(question, scope=scope)
                    events.put(("ready", None))
                    for piece in streamed:
                        if stop.is_set():
                            return
                        events.put(("sentence", {"text": piece}))
                    events.put(("result", streamed.result.to_dict()))
                locked(work, until)
            except TimeoutError:
                events.put(("busy", None))
            except ValueError as err:
                events.put(("invalid", str(err)))
            except Exception as err:  # noqa: BLE001 - reported to the client, not swallowed
                events.put(("error", f"{type(err).__name__}: {err}"))
            finally:
                events.put(None)

        threading.Thread(target=produce, daemon=True, name="ragbook-stream").start()

        async def next_event():
            left = until - time.monotonic()
            try:
                with anyio.fail_after(max(left, 0.001)):
                    return await anyio.to_thread.run_sync(events.get, abandon_on_cancel=True)
            except TimeoutError:
                stop.set()
                return ("busy", None)

        first = await next_event()
        if first is None or first[0] != "ready":
            stop.set()
            kind, detail = first or ("error", "the pipeline stopped")
            if kind == "invalid":
                raise Refused(400, detail)
            if kind == "busy":
                raise Refused(503, f"no answer within deadline={policy.deadline:g} s (one "
                                   "question at a time); retry shortly", "server_error")
            raise Refused(500, f"the pipeline failed: {detail}", "server_error")

        async def sse():
            try:
                while (event := await next_event()) is not None:
                    kind, data = event
                    if kind == "busy":
                        data = {"message": f"no answer within deadline={policy.deadline:g} s"}
                        kind = "error"
                    elif kind in ("invalid", "error"):
                        data, kind = {"message": data}, "error"
                    yield f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
                    if kind == "error":
                        return
            finally:
                stop.set()
        return StreamingResponse(sse(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    async def document(request: Request) -> Response:
        doc_id, scope = await read_request(request, "doc_id")
        segments = document_segments(getattr(pipeline.retriever, "items_", ()), doc_id, scope)
        if not segments:                  # the same answer for "absent" and "out of scope"
            raise Refused(404, "no document with that id in this server's scope; use a "
                               "doc_id from a result's sources or candidates")
        return JSONResponse({"doc_id": doc_id, "segments": segments})

    script_hash = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    page_headers = {"Content-Security-Policy": (
        f"default-src 'none'; script-src 'sha256-{script_hash}'; style-src 'unsafe-inline'; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
        "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}

    async def page(request: Request) -> Response:
        return HTMLResponse(PAGE, headers=page_headers)

    async def schema(request: Request) -> Response:
        return JSONResponse(SCHEMA)

    async def http_error(request: Request, exc: HTTPException) -> Response:
        """Starlette's own refusals (404 no such path, 405 wrong method) in the API's JSON
        error shape, as every other refusal."""
        return JSONResponse({"error": {"message": f"{exc.detail}: {request.method} "
                                                  f"{request.url.path}; see GET /schema",
                                       "type": "invalid_request_error"}},
                            exc.status_code, headers=exc.headers)

    app = Starlette(routes=[
        Route("/", page, methods=["GET"]), Route("/schema", schema, methods=["GET"]),
        Route("/ask", refusing(ask), methods=["POST"]),
        Route("/stream", refusing(stream), methods=["POST"]),
        Route("/explain", refusing(explain), methods=["POST"]),
        Route("/document", refusing(document), methods=["POST"])],
        exception_handlers={HTTPException: http_error})
    app.add_middleware(_Guard, policy=policy)
    return app


def document_segments(items, doc_id: str, scope) -> list[list]:
    """The text of document ``doc_id`` as the index holds it, stitched from its chunks that
    pass ``scope`` (``filters.scoped``): ``[[start, text], ...]``, one segment per run of
    chunks that touch or overlap (a chunk's text is its document's ``[start, end)``, so the
    offsets are the document's own); ``[]`` when none of its chunks is in the scope."""
    where = scoped(None, scope)
    chunks = sorted((i for i in items if i["doc_id"] == doc_id and i.get("start") is not None
                     and (where is None or matches(i["metadata"], where))),
                    key=lambda i: (i["start"], i["end"]))
    segments: list[list] = []
    for item in chunks:
        end = segments[-1][0] + len(segments[-1][1]) if segments else -1
        if item["start"] <= end:
            segments[-1][1] += item["text"][end - item["start"]:]
        else:
            segments.append([item["start"], item["text"]])
    return segments


def head_deadline(seconds: float) -> type[H11Protocol]:
    """uvicorn's HTTP/1.1 protocol, but a connection whose request head (line and headers)
    has not arrived ``seconds`` after it opened — or after its previous response — is
    answered 408 and closed: an idle or trickling client cannot hold one of the
    ``max_connections`` slots (uvicorn alone waits for a first request for ever)."""
    body = json.dumps({"error": {"message": f"the request line and headers did not arrive "
                                 f"within header_timeout={seconds:g} s; send the request at "
                                 "once", "type": "invalid_request_error"}}).encode()
    late = (b"HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: " + str(len(body)).encode()
            + b"\r\n\r\n" + body)

    class HeadDeadline(H11Protocol):
        def connection_made(self, transport):
            super().connection_made(transport)
            self.loop.call_later(seconds, self.head_late, self.cycle)

        def on_response_complete(self):
            super().on_response_complete()
            self.loop.call_later(seconds, self.head_late, self.cycle)

        def head_late(self, cycle) -> None:
            """408 and close, unless a request began since ``cycle`` (or one is running)."""
            waiting = self.cycle is cycle and (cycle is None or cycle.response_complete)
            if waiting and not self.transport.is_closing():
                self.transport.write(late)
                self.transport.close()

    return HeadDeadline


class RagServer:
    """``pipeline`` served by uvicorn on ``host:port`` (``port=0``: a free one) under the
    guards of ``Policy(**guards)``: ``start()`` in a background thread (or ``with``), or
    ``serve_forever()`` in this one (Ctrl-C stops it). ``max_connections`` caps open
    connections (uvicorn's ``limit_concurrency``: beyond it, 503); a connection whose
    request head is not in within ``header_timeout`` seconds is answered 408 and closed
    (``head_deadline``), so idle clients cannot fill that cap."""

    def __init__(self, pipeline: Pipeline, host: str = "127.0.0.1", port: int = 0, *,
                 max_connections: int = 16, header_timeout: float = 10.0,
                 log_level: str = "warning", **guards):
        check_positive("max_connections", max_connections, int, "16")
        check_positive("header_timeout", header_timeout, (int, float), "10.0")
        if not is_loopback(host):
            warnings.warn(f"serving on host={host!r}, not a loopback address: anyone who can "
                          "reach this port can ask the index. Use host='127.0.0.1' unless you "
                          "mean it (and then give keys= or scope=)", UserWarning, stacklevel=2)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.create_server((host.strip("[]"), port), family=family)
        try:
            self.policy = Policy(host=host, port=self._sock.getsockname()[1], **guards)
        except BaseException:
            self._sock.close()                # a refused setting leaves no port taken
            raise
        self.app = build_app(pipeline, self.policy)
        config = uvicorn.Config(self.app, http=head_deadline(header_timeout), lifespan="off",
                                log_level=log_level,
                                limit_concurrency=max_connections, timeout_keep_alive=5,
                                h11_max_incomplete_event_size=2 * self.policy.max_header_bytes)
        self._server, self._thread = uvicorn.Server(config), None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/``: the page; the API is under it."""
        host, port = self._sock.getsockname()[:2]
        return f"http://{'[' + host + ']' if ':' in host else host}:{port}/"

    def start(self) -> RagServer:
        """Serve in a background thread; returns once the server accepts requests."""
        self._thread = threading.Thread(target=self._server.run, daemon=True,
                                        kwargs={"sockets": [self._sock]}, name="ragbook-serve")
        self._thread.start()
        until = time.monotonic() + 30
        while not self._server.started and self._thread.is_alive() \
                and time.monotonic() < until:
            time.sleep(0.02)
        if not self._server.started:
            raise RuntimeError("the server did not start within 30 s; run it with "
                               "log_level='info' to see why")
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted (Ctrl-C: uvicorn finishes the requests
        under way, then raises the signal again, which is how a served index ends)."""
        try:
            self._server.run(sockets=[self._sock])
        except KeyboardInterrupt:
            pass
        finally:
            self._sock.close()

    def stop(self) -> None:
        """Stop serving and free the port."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._sock.close()

    def __enter__(self) -> RagServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def pipeline_for(index, settings=None) -> Pipeline:
    """The pipeline ``ragbook ask INDEX --settings FILE`` asks with: the saved index, with
    the settings ``ragbook tune`` or ``calibrate`` wrote for it (its threshold included)."""
    retriever = load_index(index)
    return Pipeline(**(load_settings(settings, retriever) if settings is not None
                       else {"retriever": retriever}))


def serve(index, *, settings=None, host: str = "127.0.0.1", port: int = 8000,
          block: bool = True, say=print, **options) -> RagServer:
    """Serve a saved index (a path; or a ``Pipeline``) on ``http://host:port/``, with the
    settings file ``settings`` when given; ``options`` go to ``RagServer`` (``scope``,
    ``keys``, ``max_connections``, the ``Policy`` guards). ``block=False`` returns the
    started server (call ``stop()``); otherwise ``say``s where it serves and serves until
    Ctrl-C."""
    pipeline = index if isinstance(index, Pipeline) else pipeline_for(index, settings)
    server = RagServer(pipeline, host, port, **options)
    if not block:
        return server.start()
    scope = options.get("scope")
    say(f"serving {index if not isinstance(index, Pipeline) else 'the pipeline'} at "
        f"{server.base_url} (the page; POST /ask, /stream, /explain; GET /schema)"
        + (f" in scope {json.dumps(scope)}" if scope else "") + "; Ctrl-C stops it")
    server.serve_forever()
    return server
