import contextlib
import http.client
import json
import select
import socket
import threading
import time
import urllib.error
import urllib.request
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ragbook.llm import (
    LLMResponseError,
    LLMUnavailableError,
    LocalLLM,
    OpenAICompatibleLLM,
    get_llm,
)
from ragbook.serving import ChatServer

MESSAGES = [{"role": "system", "content": "Answer in one word."},
            {"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def local():
    return LocalLLM(max_new_tokens=12)


@pytest.mark.slow
def test_local_generation_is_greedy_and_repeatable(local):
    first = local.generate(MESSAGES)
    assert "Paris" in first and local.generate(MESSAGES) == first


@pytest.mark.slow
def test_endpoint_backend_against_a_real_http_server(local):
    """The OpenAI client talks to a real chat-completions server on localhost that serves
    the local model: same greedy answer as calling the model directly."""
    with ChatServer(local) as server:
        remote = OpenAICompatibleLLM(base_url=server.base_url, model="local", max_new_tokens=12)
        assert remote.generate(MESSAGES) == local.generate(MESSAGES)
        assert remote.generate(MESSAGES, stop=["ri"]) == local.generate(MESSAGES, stop=["ri"])


def test_server_rejects_bad_requests(local):
    import json
    import urllib.error
    import urllib.request

    with ChatServer(local) as server:
        req = urllib.request.Request(server.base_url + "/chat/completions",
                                     data=b'{"messages": []}',
                                     headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=30)
        assert err.value.code == 400
        assert "messages is empty" in json.loads(err.value.read())["error"]["message"]


def test_endpoint_needs_url_and_model(monkeypatch):
    monkeypatch.delenv("RAGBOOK_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("RAGBOOK_LLM_MODEL", raising=False)
    with pytest.raises(ValueError, match="RAGBOOK_LLM_BASE_URL and RAGBOOK_LLM_MODEL"):
        OpenAICompatibleLLM()
    assert isinstance(get_llm(), LocalLLM)
    monkeypatch.setenv("RAGBOOK_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("RAGBOOK_LLM_MODEL", "qwen2.5")
    assert isinstance(get_llm(), OpenAICompatibleLLM) and get_llm().name == "qwen2.5 @ http://127.0.0.1:9/v1"


def test_bad_messages_are_explained(local):
    with pytest.raises(ValueError, match=r"messages\[0\] must be"):
        local.generate([{"role": "robot", "content": "hi"}])


@pytest.mark.slow
def test_scores_rank_the_right_continuation_first(local):
    paris, london = local.score(MESSAGES, ["Paris", "London"])
    assert paris > london
    after = local.score(MESSAGES, [" Paris.", " Madrid."], prefix="The capital of France is")
    assert after[0] > after[1] and all(s < 0 for s in after)
    with pytest.raises(ValueError, match="options is empty"):
        local.score(MESSAGES, [])


@pytest.mark.slow
def test_replies_are_cached_on_disk_and_equal_to_fresh_ones(tmp_path, monkeypatch):
    import sqlite3

    monkeypatch.setenv("RAGBOOK_CACHE", str(tmp_path))
    cached = LocalLLM(max_new_tokens=12)
    first = cached.generate(MESSAGES, stop=["."])
    db = sqlite3.connect(tmp_path / "cache" / "generations.sqlite")
    (namespace, n), = db.execute("SELECT ns, count(*) FROM entry GROUP BY ns").fetchall()
    assert n == 1 and namespace == cached.identity and "|weights=" in namespace
    assert cached.generate(MESSAGES, stop=["."]) == first == LocalLLM(
        max_new_tokens=12, cache=False).generate(MESSAGES, stop=["."])
    assert not first.endswith(".")                                   # cut at the stop string


# -- the endpoint path, fast: scripted backends behind a real ChatServer ---------------------
class Scripted:
    """A chat backend with a canned reply (or a canned failure) that counts its calls."""

    def __init__(self, reply="Paris.", error=None):
        self.reply, self.error, self.calls = reply, error, 0

    def generate(self, messages, max_new_tokens=None, stop=()):
        self.calls += 1
        if self.error is not None:
            raise self.error
        return self.reply


def post(url, body: bytes, headers=None):
    """(status, parsed JSON body) of a raw POST — errors included, never raised."""
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json",
                                                         **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@contextlib.contextmanager
def raw_server(*bodies: bytes):
    """A bare HTTP server on 127.0.0.1 answering 200 with ``bodies[i]`` at ``/i/v1/...``:
    replies no real chat-completions server would send."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = bodies[int(self.path.split("/")[1])]
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_endpoint_settings_have_bounded_defaults_and_are_validated():
    llm = OpenAICompatibleLLM(base_url="http://127.0.0.1:9/v1", model="m")
    assert (llm.timeout, llm.max_retries) == (30.0, 1)
    for bad in (0, -1.0, float("nan"), float("inf"), "30", True, None):
        with pytest.raises(ValueError, match=r"timeout must be a positive, finite number"):
            OpenAICompatibleLLM(base_url="http://127.0.0.1:9/v1", model="m", timeout=bad)
    for bad in (-1, True, 1.5, "1"):
        with pytest.raises(ValueError, match=r"max_retries must be an int >= 0"):
            OpenAICompatibleLLM(base_url="http://127.0.0.1:9/v1", model="m", max_retries=bad)


def test_a_silent_server_fails_fast_with_an_error_naming_url_and_timeout():
    with socket.socket() as silent:                  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        llm = OpenAICompatibleLLM(base_url=url, model="m", timeout=0.5, max_retries=0)
        t = time.perf_counter()
        with pytest.raises(LLMUnavailableError, match=r"timeout=0\.5") as err:
            llm.generate(MESSAGES)
        assert time.perf_counter() - t < 3 and url in str(err.value)
    with pytest.raises(LLMUnavailableError, match="could not connect") as err:   # port now closed
        OpenAICompatibleLLM(base_url=url, model="m", timeout=0.5, max_retries=0).generate(MESSAGES)
    assert url in str(err.value)


def test_replies_that_are_not_chat_completions_raise_a_clear_error():
    bodies = (b"{}", b'{"choices": []}', b'{"choices": [{}]}', b'{"choices": [{"message": null}]}',
              b'{"choices": [{"message": {"content": null}}]}',
              b'{"choices": [{"message": {"content": 42}}]}', b"[]", b"<html>not an API</html>")
    with raw_server(*bodies) as root:
        for i, body in enumerate(bodies):
            llm = OpenAICompatibleLLM(base_url=f"{root}/{i}/v1", model="m", max_retries=0)
            with pytest.raises(LLMResponseError, match="OpenAI-compatible") as err:
                llm.generate(MESSAGES)
            assert body.decode()[:20] in str(err.value)             # says what came back


def test_endpoint_round_trip_through_the_chat_server_with_an_api_key():
    backend = Scripted("Paris, of course.")
    with ChatServer(backend, api_key="s3cret") as server:
        llm = OpenAICompatibleLLM(base_url=server.base_url, model="m", api_key="s3cret")
        assert llm.generate(MESSAGES) == "Paris, of course."
        assert llm.generate(MESSAGES, stop=[","]) == "Paris"
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            code, body = post(server.base_url + "/chat/completions",
                              json.dumps({"messages": MESSAGES}).encode(), headers)
            assert code == 401 and body["error"]["type"] == "invalid_request_error"
        with pytest.raises(LLMResponseError, match="401"):
            wrong = OpenAICompatibleLLM(base_url=server.base_url, model="m", api_key="wrong")
            wrong.generate(MESSAGES)
    assert backend.calls == 2


def test_server_answers_malformed_requests_with_400_and_never_calls_the_backend():
    backend = Scripted()
    bad = [b"not json", b"[]", b"{}", b'{"messages": "hi"}', b'{"messages": ["hi"]}',
           b'{"messages": [{"role": "user"}]}',
           b'{"messages": [{"role": "robot", "content": "x"}]}']
    ok = {"messages": MESSAGES}
    bad += [json.dumps({**ok, **extra}).encode() for extra in
            ({"max_tokens": "12"}, {"max_tokens": True}, {"max_tokens": 0}, {"stop": 5},
             {"stop": [1]})]
    with ChatServer(backend) as server:
        for body in bad:
            code, reply = post(server.base_url + "/chat/completions", body)
            assert code == 400 and reply["error"]["type"] == "invalid_request_error", body
            assert reply["error"]["message"]
        assert post(server.base_url + "/chat/completions", json.dumps(ok).encode())[0] == 200
    assert backend.calls == 1


def test_server_refuses_oversized_requests_without_reading_them():
    backend = Scripted()
    with ChatServer(backend, max_request_bytes=1000) as server:
        conn = http.client.HTTPConnection(*server._httpd.server_address[:2], timeout=10)
        conn.putrequest("POST", "/v1/chat/completions")
        conn.putheader("Content-Length", str(10**9))       # claims a gigabyte, sends nothing
        conn.endheaders()
        resp = conn.getresponse()
        assert resp.status == 413
        assert "max_request_bytes=1000" in json.loads(resp.read())["error"]["message"]
        conn.close()
    assert backend.calls == 0
    for bad in (0, -5, True, 1.5):
        with pytest.raises(ValueError, match="max_request_bytes"):
            ChatServer(backend, max_request_bytes=bad)


def test_a_failing_backend_runs_once_and_the_client_gets_a_500():
    backend = Scripted(error=RuntimeError("out of memory"))
    with ChatServer(backend) as server:
        request = json.dumps({"messages": MESSAGES}).encode()
        code, body = post(server.base_url + "/chat/completions", request)
        assert code == 500 and "out of memory" in body["error"]["message"]
        backend.calls = 0
        llm = OpenAICompatibleLLM(base_url=server.base_url, model="m", max_retries=2)
        with pytest.raises(LLMResponseError, match="500.*out of memory"):
            llm.generate(MESSAGES)
    assert backend.calls == 1                        # the error is not retried: greedy fails alike


def test_serving_beyond_loopback_warns():
    with pytest.warns(UserWarning, match="192.0.2.1.*not a loopback"), pytest.raises(OSError):
        ChatServer(Scripted(), host="192.0.2.1")     # TEST-NET address: the bind itself fails
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for host in ("127.0.0.1", "localhost"):
            with ChatServer(Scripted(), host=host):
                pass


# -- the server's guards: web pages (DNS rebinding, cross-site posts) and stuck clients --------
def raw_exchange(address, request: bytes, timeout=5.0):
    """(status, parsed JSON body) of one raw HTTP exchange on a fresh socket: the request is
    sent as given (any Host, any framing) and the reply read until the server closes."""
    with socket.create_connection(address, timeout=timeout) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def chat_request(headers: dict, body: bytes = b"") -> bytes:
    lines = ["POST /v1/chat/completions HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


OK_BODY = json.dumps({"messages": MESSAGES}).encode()


def test_server_serves_only_loopback_host_names_unless_allowed():
    backend = Scripted()
    with ChatServer(backend) as server:
        address = server._httpd.server_address[:2]
        port = address[1]
        for host in (f"127.0.0.1:{port}", "127.0.0.1", f"localhost:{port}", "LOCALHOST",
                     f"127.5.6.7:{port}", f"[::1]:{port}"):
            headers = {"Host": host, "Content-Type": "application/json",
                       "Content-Length": len(OK_BODY)}
            assert raw_exchange(address, chat_request(headers, OK_BODY))[0] == 200, host
        for host in ("evil.example", f"evil.example:{port}", f"localhost:{port + 1}",
                     f"attacker.localhost.evil:{port}", "", "::1", "127.0.0.1:x"):
            headers = {"Host": host, "Content-Type": "application/json",
                       "Content-Length": len(OK_BODY)}
            code, reply = raw_exchange(address, chat_request(headers, OK_BODY))
            assert code == 421, host
            assert "allowed_hosts=" in reply["error"]["message"] and "DNS rebinding" in \
                reply["error"]["message"]
        no_host = chat_request({"Content-Type": "application/json",
                                "Content-Length": len(OK_BODY)}, OK_BODY)
        assert raw_exchange(address, no_host)[0] == 421
        two = chat_request({"Host": "localhost", "host": "evil.example",
                            "Content-Type": "application/json",
                            "Content-Length": len(OK_BODY)}, OK_BODY)
        assert raw_exchange(address, two)[0] == 421
    assert backend.calls == 6
    with ChatServer(backend, allowed_hosts=("myhost.lan",)) as server:
        address = server._httpd.server_address[:2]
        for host, code in ((f"MyHost.lan:{address[1]}", 200), ("myhost.lan", 200),
                           ("localhost", 200), ("other.lan", 421)):
            headers = {"Host": host, "Content-Type": "application/json",
                       "Content-Length": len(OK_BODY)}
            assert raw_exchange(address, chat_request(headers, OK_BODY))[0] == code, host
    with ChatServer(backend, allowed_hosts=("*",)) as server:
        headers = {"Host": "anything.example", "Content-Type": "application/json",
                   "Content-Length": len(OK_BODY)}
        assert raw_exchange(server._httpd.server_address[:2],
                            chat_request(headers, OK_BODY))[0] == 200


def test_server_refuses_cross_site_requests_text_plain_and_foreign_origins():
    backend = Scripted()
    with ChatServer(backend, allowed_origins=("https://app.example",)) as server:
        url = server.base_url + "/chat/completions"
        for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
            code, reply = post(url, OK_BODY, {"Content-Type": ctype})
            assert code == 415 and "application/json" in reply["error"]["message"], ctype
        address = server._httpd.server_address[:2]
        no_type = chat_request({"Host": "localhost", "Content-Length": len(OK_BODY)}, OK_BODY)
        assert raw_exchange(address, no_type)[0] == 415
        assert backend.calls == 0
        assert post(url, OK_BODY, {"Content-Type": "application/json; charset=utf-8"})[0] == 200
        for origin in ("https://evil.example", "http://localhost.evil.example", "null",
                       "http://evil.example:8000", "file://"):
            code, reply = post(url, OK_BODY, {"Origin": origin})
            assert code == 403, origin
            assert "allowed_origins=" in reply["error"]["message"]
        for origin in ("http://localhost:8888", "http://127.0.0.1", "https://[::1]:3000",
                       "https://app.example", "HTTPS://APP.EXAMPLE/"):
            assert post(url, OK_BODY, {"Origin": origin})[0] == 200, origin
    assert backend.calls == 6


def test_server_answers_chunked_bodies_with_411():
    backend = Scripted()
    with ChatServer(backend) as server:
        chunked = chat_request({"Host": "localhost", "Content-Type": "application/json",
                                "Transfer-Encoding": "chunked"},
                               b"%x\r\n%s\r\n0\r\n\r\n" % (len(OK_BODY), OK_BODY))
        code, reply = raw_exchange(server._httpd.server_address[:2], chunked)
        assert code == 411 and "Content-Length" in reply["error"]["message"]
    assert backend.calls == 0


def wait_for(condition, seconds=5.0):
    until = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < until, "timed out waiting"
        time.sleep(0.01)


def test_connections_beyond_max_waiting_get_503_at_once_and_the_queue_frees_up():
    backend = Scripted()
    # deadlines far past the test's own steps, so no stalled socket can expire mid-test
    with ChatServer(backend, max_waiting=3, request_timeout=120, header_timeout=120) as server:
        address = server._httpd.server_address[:2]
        threads = threading.active_count()
        stalled = [socket.create_connection(address, timeout=5) for _ in range(3)]
        try:
            wait_for(lambda: server._httpd.waiting_connections == 3)
            assert server._httpd.active_connections == 0     # idle sockets hold no thread
            t = time.monotonic()
            for _ in range(3):                        # each extra one is turned away, fast
                headers = {"Host": "localhost", "Content-Type": "application/json",
                           "Content-Length": len(OK_BODY)}
                code, reply = raw_exchange(address, chat_request(headers, OK_BODY))
                assert code == 503 and "max_waiting=3" in reply["error"]["message"]
            assert time.monotonic() - t < 30 and backend.calls == 0    # not at the deadline
            assert threading.active_count() <= threads    # no thread for any of them
        finally:
            for sock in stalled:
                sock.close()
        wait_for(lambda: server._httpd.waiting_connections == 0)
        assert post(server.base_url + "/chat/completions", OK_BODY)[0] == 200
    for name, bad in (("max_connections", 0), ("max_connections", 2.0),
                      ("max_connections", True), ("request_timeout", 0),
                      ("header_timeout", -1), ("max_waiting", 0),
                      ("request_timeout", float("inf")), ("request_timeout", "30")):
        with pytest.raises(ValueError, match=rf"{name} must be .*e\.g\. {name}="):
            ChatServer(backend, **{name: bad})
    for name, bad in (("allowed_hosts", "myhost.lan"), ("allowed_hosts", ("http://h",)),
                      ("allowed_hosts", ("h:8000",)), ("allowed_origins", ("app.example",)),
                      ("allowed_origins", ("https://app.example/path",)),
                      ("allowed_origins", [None])):
        with pytest.raises(ValueError, match=rf"{name} .*e\.g\. {name}="):
            ChatServer(backend, **{name: bad})


def test_max_waiting_holds_while_the_gate_takes_new_connections_in():
    """Connections the gate is moving into its waiting set stay counted. On a loaded machine
    a request arriving while the gate took three stalled connections in was served instead of
    refused: the count dipped while they moved. Here the gate is made slow the same way (its
    selector sleeps), and the request is sent once the gate has begun to move them."""
    backend = Scripted()
    headers = {"Host": "localhost", "Content-Type": "application/json",
               "Content-Length": len(OK_BODY)}
    with ChatServer(backend, max_waiting=3, request_timeout=120, header_timeout=120) as server:
        httpd = server._httpd
        real_select, register = httpd._selector.select, httpd._selector.register

        def slow_select(timeout=None):          # the three arrive before the gate looks
            time.sleep(0.05)
            return real_select(timeout)

        def slow_register(*args):               # ... and it takes them in slowly
            time.sleep(0.3)
            return register(*args)

        httpd._selector.select, httpd._selector.register = slow_select, slow_register
        address = httpd.server_address[:2]
        stalled = [socket.create_connection(address, timeout=5) for _ in range(3)]
        try:
            wait_for(lambda: len(httpd._waiting) >= 1)      # the gate is moving them in
            code, reply = raw_exchange(address, chat_request(headers, OK_BODY))
            assert code == 503 and "max_waiting=3" in reply["error"]["message"], code
        finally:
            for sock in stalled:
                sock.close()
    assert backend.calls == 0


def test_a_trickling_or_silent_client_is_cut_with_408_at_the_request_deadline():
    backend = Scripted()
    with ChatServer(backend, request_timeout=0.6) as server:
        address = server._httpd.server_address[:2]
        with socket.create_connection(address, timeout=5) as sock:
            t = time.monotonic()
            request = chat_request({"Host": "localhost", "Content-Type": "application/json",
                                    "Content-Length": len(OK_BODY)}, OK_BODY)
            for byte in request:                   # one byte every 20 ms: never whole in time
                if select.select([sock], [], [], 0)[0] or time.monotonic() - t > 5:
                    break
                sock.sendall(bytes([byte]))
                time.sleep(0.02)
            data = b""
            while chunk := sock.recv(65536):       # the server closes after its answer
                data += chunk
            elapsed = time.monotonic() - t
        assert data.startswith(b"HTTP/1.0 408"), data[:100]
        assert "request_timeout=0.6" in data.decode() and 0.5 < elapsed < 3, elapsed
        with socket.create_connection(address, timeout=5) as sock:   # sends nothing at all
            t = time.monotonic()
            assert sock.recv(65536).startswith(b"HTTP/1.0 408")
            assert time.monotonic() - t < 3
        assert backend.calls == 0
        llm = OpenAICompatibleLLM(base_url=server.base_url, model="m", max_retries=0)
        assert llm.generate(MESSAGES) == "Paris."   # a whole request in time is served
