"""ChatServer under stalled clients and bursts: how long real requests wait.

A backend that takes ``--backend-ms`` per reply (a stand-in for a model) behind the default
``ChatServer`` (16 threads, header_timeout 10 s, max_waiting 512). Two scenarios:

* ``stalled``: ``--stalled`` connections opened and left idle (never sending a byte), then
  ``--real`` well-formed requests one after another: their statuses and latencies;
* ``burst``: ``--burst`` well-formed requests sent at once from as many threads: how many
  got 200 and the time until the last answer.

    flock /tmp/ragbook-heavy.lock .venv/bin/python bench/server_stall.py
"""
import argparse
import json
import socket
import statistics
import threading
import time

from ragbook.serving import ChatServer

BODY = json.dumps({"messages": [{"role": "user", "content": "capital of France?"}]}).encode()
REQUEST = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
           f"application/json\r\nContent-Length: {len(BODY)}\r\n\r\n").encode() + BODY


class Backend:
    def __init__(self, seconds):
        self.seconds = seconds

    def generate(self, messages, max_new_tokens=None, stop=()):
        time.sleep(self.seconds)
        return "Paris."


def exchange(address) -> tuple[int, float]:
    t = time.monotonic()
    with socket.create_connection(address, timeout=60) as sock:
        sock.sendall(REQUEST)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return int(data.split()[1]), time.monotonic() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stalled", type=int, default=100)
    ap.add_argument("--real", type=int, default=20)
    ap.add_argument("--burst", type=int, default=64)
    ap.add_argument("--backend-ms", type=float, default=20.0)
    args = ap.parse_args()
    with ChatServer(Backend(args.backend_ms / 1000)) as server:
        address = server._httpd.server_address[:2]
        idle = [socket.create_connection(address) for _ in range(args.stalled)]
        got = [exchange(address) for _ in range(args.real)]
        lat = [s for _, s in got]
        print(f"stalled: {args.stalled} idle sockets; {args.real} real requests: "
              f"{sum(c == 200 for c, _ in got)} x 200, latency median "
              f"{statistics.median(lat) * 1000:.1f} ms, max {max(lat) * 1000:.1f} ms")
        for sock in idle:
            sock.close()
        results: list[tuple[int, float]] = []
        lock = threading.Lock()

        def one():
            r = exchange(address)
            with lock:
                results.append(r)

        threads = [threading.Thread(target=one) for _ in range(args.burst)]
        t = time.monotonic()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        print(f"burst: {args.burst} concurrent requests: {sum(c == 200 for c, _ in results)} "
              f"x 200, last answered after {time.monotonic() - t:.2f} s (backend "
              f"{args.backend_ms:g} ms each, one generation at a time)")


if __name__ == "__main__":
    main()
