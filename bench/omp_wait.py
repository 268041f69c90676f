"""OpenMP's wait policy when a torch process shares two cores: spinning vs passive waits.

Why: ``make test`` runs the notebooks in a kernel beside the tests, two processes on two
cores. torch's OpenMP threads spin while they wait for a sibling thread; when the scheduler
has put that sibling off for the other process, the spinning burns the core the other
process needs. tests/conftest.py sets ``OMP_WAIT_POLICY=PASSIVE`` for the suite; this
measures what that buys.

Each row runs a fresh subprocess (the policy is read when torch loads) that encodes 192
texts of ~240 tokens with ``Encoder(cache=False)`` (torch's default threads, 2 here), after
one warm-up batch: wall seconds and the process's CPU seconds. *Beside a busy core*: a
second process spins in a Python loop for the whole encode. Ratios are within one run.

    flock /tmp/ragbook-heavy.lock .venv/bin/python bench/omp_wait.py
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

ENCODE = """
import json, time
from ragbook.embeddings import Encoder
texts = [("word%d " % i) * 120 for i in range(192)]
encoder = Encoder(cache=False, show_progress=False)
encoder.encode_passages(texts[:16])
cpu, wall = time.process_time(), time.perf_counter()
encoder.encode_passages(texts)
print(json.dumps({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}))
"""


def encode(policy: str | None, busy: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env.setdefault("RAGBOOK_PROFILE", "offline")
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        time.sleep(0.5 if busy else 0)
        out = subprocess.run([sys.executable, "-c", ENCODE], env=env, capture_output=True,
                             text=True, check=True).stdout
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    rows = [(policy, busy, encode(policy, busy))
            for busy in (False, True) for policy in (None, "PASSIVE")]
    print(f"{'OMP_WAIT_POLICY':16s} {'beside':18s} {'wall s':>7s} {'CPU s':>7s}")
    for policy, busy, r in rows:
        print(f"{policy or '(default)':16s} {'a busy core' if busy else 'nothing':18s} "
              f"{r['wall']:7.2f} {r['cpu']:7.2f}")
    default, passive = rows[2][2], rows[3][2]
    print(f"beside a busy core, passive / default: wall {passive['wall'] / default['wall']:.2f}, "
          f"CPU {passive['cpu'] / default['cpu']:.2f}")


if __name__ == "__main__":
    main()
