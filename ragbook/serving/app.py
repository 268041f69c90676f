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
  at a time: the models are not re-entrant, so waiting for one counts); past it the work
  is stopped (``jobs.Job``), so a stuck upstream LLM cannot hold the others back;
- ``max_connections`` questions on a thread at once, the rest queued; beyond
  ``max_waiting`` more open connections, 503 with ``Retry-After``; a request head not in
  within ``header_timeout`` is 408 and closed, so idle clients cannot fill the queue;
- a failure of the pipeline itself (an LLM endpoint down, a corrupt index) is a 500
  ``server_error`` saying only that: the details go to the server's log, not the client.

The access scope is the server's, never the request's: one server-wide ``scope``, or one per
API key (``keys``, sent as ``Authorization: Bearer <key>``; a missing or unknown key is 401).
A request may send its own ``scope`` (``{"access": "public"}``) only to *narrow* it: asking
for a value the server's scope does not grant is 403, and nothing is searched.
"""
from __future__ import annotations

import base64
import hashlib
import json
import socket
import threading
import time
import warnings

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..checks import check_text
from ..commands import load_index
from ..explain import explain_result_dicts
from ..filters import matches, scoped
from ..pipeline import Pipeline
from ..tuned import load_settings
from .guards import check_positive, is_loopback
from .jobs import Job
from .page import PAGE, SCRIPT
from .policy import Policy, Refused, narrow_scope
from .protocol import head_deadline
from .schema import SCHEMA

__all__ = ["build_app", "document_segments", "head_deadline", "RagServer", "serve",
           "pipeline_for", "sse"]


def sse(kind: str, data) -> str:
    """One server-sent event: ``event: kind`` and ``data`` as one line of JSON. U+2028 and
    U+2029 are escaped (``\\u2028``): JSON allows them raw, but a reader that splits lines
    at them (a JavaScript regex's ``$`` and ``.``) would cut the event in two."""
    text = json.dumps(data, ensure_ascii=False)
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return f"event: {kind}\ndata: {text}\n\n"


def _once(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object whose keys are all different; ``ValueError`` for a key given twice
    (``{"question": "a", "question": "b"}``: Python keeps the last, other readers the first)."""
    obj = dict(pairs)
    if len(obj) < len(pairs):
        raise ValueError("a key is given twice")
    return obj


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


def build_app(pipeline: Pipeline, policy: Policy | None = None, max_connections: int = 16
              ) -> Starlette:
    """The ASGI app serving ``pipeline`` under ``policy`` (default: loopback, no scope):
    ``GET /`` the page, ``GET /schema`` the JSON schema, ``POST /ask``, ``POST /stream``
    (server-sent events), ``POST /explain``, ``POST /document`` (a document's text, within
    the scope, to show a citation in place). ``max_connections`` questions are worked on at
    once; the others wait for a slot, within their deadline."""
    policy = policy or Policy()
    lock = threading.Lock()                   # one question at a time: models not re-entrant
    slots = anyio.Semaphore(max_connections)  # questions on a thread at once; the rest queue

    async def read_request(request: Request, field: str = "question"
                           ) -> tuple[str, dict | None]:
        body = bytearray()
        close = {"Connection": "close"}       # the rest of the body is not read: end it
        try:
            with anyio.fail_after(policy.request_timeout):
                async for chunk in request.stream():
                    body += chunk
                    if len(body) > policy.max_body_bytes:
                        raise Refused(413, f"the body is over max_body_bytes="
                                           f"{policy.max_body_bytes}; send a shorter question",
                                      headers=close)
        except TimeoutError:
            raise Refused(408, f"the body did not arrive within request_timeout="
                               f"{policy.request_timeout:g} s; send it at once",
                          headers=close) from None
        except ClientDisconnect:          # nobody reads the answer; no traceback in the log
            raise Refused(400, "the client closed the connection before its body arrived; "
                               "send the whole body", headers=close) from None
        fixed = policy.scope_for(request.headers.get("authorization"))
        try:                  # a key sent twice is refused: which one a proxy or a log
            req = json.loads(body, object_pairs_hook=_once)   # read is not the one served
        except (ValueError, RecursionError):      # RecursionError: [[[[... nested past Python
            req = None
        if not isinstance(req, dict) or not isinstance(req.get(field), str) \
                or not req[field].strip() or set(req) - {field, "scope"}:
            raise Refused(400, f"the body must be a JSON object {{\"{field}\": \"...\"}} with "
                               "an optional \"scope\" (nothing else, each key once); see "
                               "GET /schema")
        try:                  # the request's own faults are 400 here; the pipeline's are 500
            check_text(req[field], field)
        except ValueError as err:
            raise Refused(400, f"{err}") from None
        return req[field], narrow_scope(fixed, req.get("scope"))

    busy = (f"no answer within deadline={policy.deadline:g} s (the server answers one "
            "question at a time); retry shortly")
    failed = ("the server failed to answer this question (the details are in the server's "
              "log); retry later, or tell the server's operator")

    async def start(work, until: float):
        """A ``Job`` for ``work`` once one of the ``max_connections`` slots is free (503
        past ``until``), and the idempotent ``end()`` that stops it and frees the slot."""
        try:
            with anyio.fail_after(max(until - time.monotonic(), 0.001)):
                await slots.acquire()
        except TimeoutError:
            raise Refused(503, busy, "server_error", headers={"Retry-After": "1"}) from None
        job, ended = Job(lock, work, until), []

        async def end():
            if not ended:
                ended.append(True)
                job.stop()
                slots.release()
        return job, end

    async def next_event(job: Job, until: float):
        """The job's next event; ``("busy", None)`` (and the job stopped) past ``until``."""
        try:
            with anyio.fail_after(max(until - time.monotonic(), 0.001)):
                return await anyio.to_thread.run_sync(job.events.get, abandon_on_cancel=True)
        except TimeoutError:
            job.stop()
            return ("busy", None)

    def refusal(kind: str) -> Refused:
        """The refusal for a job's last event ``kind`` when it is not ``done``."""
        if kind == "failed":
            return Refused(500, failed, "server_error")
        return Refused(503, busy, "server_error", headers={"Retry-After": "1"})

    async def answer(work):
        until = time.monotonic() + policy.deadline
        job, end = await start(lambda _: work(), until)
        try:
            kind, value = await next_event(job, until)
        finally:
            await end()
        if kind != "done":
            raise refusal(kind)
        return value

    def refusing(endpoint):
        async def run(request: Request) -> Response:
            try:
                return await endpoint(request)
            except Refused as err:
                return JSONResponse(err.body(), err.status, headers=err.headers)
        return run

    async def ask(request: Request) -> Response:
        question, scope = await read_request(request)
        return JSONResponse(await answer(lambda: pipeline.ask(question, scope=scope).to_dict()))

    async def explain(request: Request) -> Response:
        question, scope = await read_request(request)

        def work():
            result = pipeline.ask(question, scope=scope)
            return {"result": result.to_dict(),
                    "explanations": explain_result_dicts(pipeline, result)}
        return JSONResponse(await answer(work))

    async def stream(request: Request) -> Response:
        question, scope = await read_request(request)
        until = time.monotonic() + policy.deadline

        def work(job: Job):
            streamed = pipeline.stream(question, scope=scope)
            for piece in streamed:
                if job.stopped:
                    return None
                job.events.put(("sentence", {"text": piece}))
            return streamed.result.to_dict()

        job, end = await start(work, until)
        first = ("busy", None)
        try:                                   # the headers wait for the first event: a
            first = await next_event(job, until)   # failure before any sentence is 500/503
        finally:
            if first[0] in ("busy", "failed"):
                await end()
        if first[0] in ("busy", "failed"):
            raise refusal(first[0])

        async def events():
            kind, data = first
            try:
                while kind not in ("busy", "failed"):
                    yield sse("result" if kind == "done" else kind, data)
                    if kind == "done":
                        return
                    kind, data = await next_event(job, until)
                yield sse("error", {"message": failed if kind == "failed" else
                                    f"no answer within deadline={policy.deadline:g} s"})
            finally:
                await end()
        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"},
                                 background=BackgroundTask(end))   # also if never started

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
        error shape, as every other refusal; the path is not echoed (a reply quotes
        nothing the request sent)."""
        what = {404: "no such endpoint", 405: "this endpoint does not take that method"}
        return JSONResponse({"error": {"message": f"{what.get(exc.status_code, exc.detail)}"
                                                  "; the endpoints are GET /, GET /schema, "
                                                  "POST /ask, /stream, /explain, /document "
                                                  "(see GET /schema)",
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


class RagServer:
    """``pipeline`` served by uvicorn on ``host:port`` (``port=0``: a free one) under the
    guards of ``Policy(**guards)``: ``start()`` in a background thread (or ``with``), or
    ``serve_forever()`` in this one (Ctrl-C stops it). As ``ChatServer``'s, well-formed
    requests queue rather than being refused: ``max_connections`` questions are worked on
    at once (each on a thread, taking turns at the pipeline), the others wait in line,
    first come first served, within their ``deadline``; up to ``max_waiting`` more
    connections may be open at once (waiting for their head, or in that line), and one
    beyond is answered 503 (JSON, ``Retry-After: 1``). A connection whose request head is
    not in within ``header_timeout`` seconds is answered 408 and closed (``head_deadline``),
    so idle clients cannot fill the queue."""

    def __init__(self, pipeline: Pipeline, host: str = "127.0.0.1", port: int = 0, *,
                 max_connections: int = 16, max_waiting: int = 512,
                 header_timeout: float = 10.0, log_level: str = "warning", **guards):
        check_positive("max_connections", max_connections, int, "16")
        check_positive("max_waiting", max_waiting, int, "512")
        check_positive("header_timeout", header_timeout, (int, float), "10.0")
        if not is_loopback(host):
            warnings.warn(f"serving on host={host!r}, not a loopback address: anyone who can "
                          "reach this port can ask the index. Use host='127.0.0.1' unless you "
                          "mean it (and then give keys= or scope=)", UserWarning, stacklevel=2)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.create_server((host.strip("[]"), port), family=family,
                                          backlog=1024)     # a burst's SYNs are not dropped
        try:
            self.policy = Policy(host=host, port=self._sock.getsockname()[1], **guards)
        except BaseException:
            self._sock.close()                # a refused setting leaves no port taken
            raise
        self.app = build_app(pipeline, self.policy, max_connections)
        config = uvicorn.Config(self.app, lifespan="off", log_level=log_level,
                                http=head_deadline(header_timeout, max_connections + max_waiting),
                                timeout_keep_alive=5,
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
