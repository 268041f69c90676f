"""The chat server stays up under stalled clients and bursts (issue 36, item 6): 100
connections opened and left idle do not stop a real request, 64 concurrent well-formed
requests are all answered (queued, not refused), and idle sockets are dropped at the header
deadline. Bounds here are generous (not stuck), timings belong in bench/."""
import json
import socket
import time

from ragbook.serving import ChatServer

MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]
BODY = json.dumps({"messages": MESSAGES}).encode()


class Slow:
    """A backend that takes a little while, as a model does, and counts its calls."""

    def __init__(self, seconds=0.005):
        self.seconds, self.calls = seconds, 0

    def generate(self, messages, max_new_tokens=None, stop=()):
        time.sleep(self.seconds)
        self.calls += 1
        return "Paris."


def exchange(address, timeout=30.0) -> int:
    """The status of one well-formed chat request on a fresh connection."""
    request = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
               f"application/json\r\nContent-Length: {len(BODY)}\r\n\r\n").encode() + BODY
    with socket.create_connection(address, timeout=timeout) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return int(data.split()[1])


def test_100_stalled_connections_do_not_stop_a_real_request():
    backend = Slow()
    with ChatServer(backend) as server:              # the defaults: 16 threads, 10 s headers
        address = server._httpd.server_address[:2]
        stalled = [socket.create_connection(address, timeout=30) for _ in range(100)]
        try:
            t = time.monotonic()
            statuses = [exchange(address) for _ in range(5)]
            elapsed = time.monotonic() - t
            assert statuses == [200] * 5
            assert elapsed < 10, elapsed             # served at once, not after a deadline
            assert server._httpd.active_connections <= server.max_connections
        finally:
            for sock in stalled:
                sock.close()


def test_64_concurrent_requests_are_all_answered(at_once):
    backend = Slow()
    with ChatServer(backend) as server:
        address = server._httpd.server_address[:2]
        statuses, elapsed = at_once(lambda: exchange(address))
        assert statuses == [200] * 64, statuses
        assert backend.calls == 64 and elapsed < 30, elapsed


def test_idle_connections_are_dropped_at_the_header_deadline():
    with ChatServer(Slow(), header_timeout=0.5) as server:
        address = server._httpd.server_address[:2]
        socks = [socket.create_connection(address, timeout=10) for _ in range(20)]
        t = time.monotonic()
        try:
            for sock in socks:
                data = sock.recv(65536)
                assert data.startswith(b"HTTP/1.0 408") and b"header_timeout=0.5" in data
            assert time.monotonic() - t < 5
        finally:
            for sock in socks:
                sock.close()
        time.sleep(0.2)
        assert server._httpd.waiting_connections == 0
        assert exchange(address) == 200


def test_clients_stalled_mid_body_hold_no_thread():
    backend = Slow()
    with ChatServer(backend, max_connections=4, request_timeout=20) as server:
        address = server._httpd.server_address[:2]
        head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                b"application/json\r\nContent-Length: 500\r\n\r\n{\"messages\": ")
        stalled = [socket.create_connection(address, timeout=30) for _ in range(20)]
        try:
            for sock in stalled:              # the head and part of the body, then nothing
                sock.sendall(head)
            time.sleep(0.3)
            t = time.monotonic()
            assert [exchange(address) for _ in range(3)] == [200] * 3
            assert time.monotonic() - t < 10          # not after request_timeout=20
            assert server._httpd.waiting_connections == 20   # still in the gate, no thread
        finally:
            for sock in stalled:
                sock.close()
