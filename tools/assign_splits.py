"""Give every labelled help-centre question a split, stably.

A question's split is a function of its id alone (sha1 bucket: 30% train, 25% dev, 45%
test), so adding questions never moves existing ones between splits, and a question keeps
its split when its wording is corrected. Rows that already have a split keep it.

    python tools/assign_splits.py            # rewrite data/helpcentre/questions/*.jsonl
    python tools/assign_splits.py --check    # exit 1 if any row lacks a split
"""
import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "data" / "helpcentre" / "questions"


def split_of(qid: str) -> str:
    bucket = int(hashlib.sha1(qid.encode()).hexdigest(), 16) % 100
    return "train" if bucket < 30 else "dev" if bucket < 55 else "test"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    missing = 0
    for path in sorted(ROOT.glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
                if line.strip()]
        missing += sum("split" not in r for r in rows)
        if not args.check:
            for r in rows:
                r.setdefault("split", split_of(r["id"]))
            path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                            encoding="utf-8")
    if args.check and missing:
        print(f"{missing} questions have no split; run python tools/assign_splits.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
