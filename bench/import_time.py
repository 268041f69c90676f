"""How long `import ragbook` takes in a fresh interpreter (median of 5), next to numpy alone
for scale. Heavy libraries load lazily, so this should stay well under a second."""
import statistics
import subprocess
import sys
import time


def timed(code: str, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


if __name__ == "__main__":
    base = timed("pass")
    numpy = timed("import numpy") - base
    ours = timed("import ragbook") - base
    print(f"{'what':18s} {'seconds':>8s}")
    print(f"{'import numpy':18s} {numpy:8.3f}")
    print(f"{'import ragbook':18s} {ours:8.3f}")
    print(f"{'ratio':18s} {ours / numpy:8.2f}x")
