"""Write (or ``--check``) the generator's shipped replies (``ragbook.shipped``):
``data/replies/<model identity>.json``, the rows of the ``generations`` cache that the book's
chapters write, so that a first run does not generate them again (issue 34: from an empty
cache, chapter 8 spent about a minute of its first run on 2 Intel Xeon cores writing them).

The rows come from a cache folder that only the book has written to: run the chapters that
use the generator with ``RAGBOOK_CACHE`` set to a new folder (its ``embeddings`` may be a link
to your filled one: vectors are not replies), then ship that folder's rows::

    mkdir -p /tmp/book/cache && ln -s ~/.cache/ragbook/embeddings /tmp/book/embeddings
    RAGBOOK_CACHE=/tmp/book jupyter nbconvert --execute --to notebook --output-dir /tmp \\
        notebooks/0[789]*.ipynb notebooks/10*.ipynb solutions/08*.ipynb solutions/12*.ipynb
    .venv/bin/python tools/ship_replies.py /tmp/book           # write
    .venv/bin/python tools/ship_replies.py --check             # the probe agrees

The probe is one short request written by the model now, with its cache off.
"""
import argparse
import json
import sqlite3
import sys
from pathlib import Path

from ragbook import models
from ragbook.llm import LocalLLM
from ragbook.shipped import ShippedReplies, replies_file

PROBE = {"messages": [{"role": "user", "content": "Which city is the capital of France?"}],
         "max_new_tokens": 12, "stop": []}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", type=Path,
                        help="the RAGBOOK_CACHE folder of a run of the book's LLM chapters")
    parser.add_argument("--check", action="store_true", help="verify instead of writing")
    args = parser.parse_args()
    if models.active_profile() != "offline":
        sys.exit("run with RAGBOOK_PROFILE=offline: only the offline generator's replies ship")
    llm = LocalLLM(cache=False)
    path = replies_file(llm.identity)
    if args.check:
        ok = ShippedReplies(path).verify(llm._run)
        print(f"{path.name}: {'probe agrees' if ok else 'probe disagrees'} with this model")
        return 0 if ok else 1
    if args.folder is None:
        parser.error("give the cache folder to ship from (or --check)")
    db = sqlite3.connect(args.folder / "cache" / "generations.sqlite")
    rows = {key: json.loads(value) for key, value in db.execute(   # the cache stores JSON
        "SELECT key, value FROM entry WHERE ns = ? ORDER BY key", (llm.identity,))}
    if not rows:
        sys.exit(f"no replies of {llm.identity} in {args.folder}: run the chapters there first")
    probe = {**PROBE, "reply": llm._run(PROBE["messages"], PROBE["max_new_tokens"],
                                         PROBE["stop"])}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"model": llm.identity, "probe": probe, "rows": rows},
                               ensure_ascii=False, indent=0, sort_keys=True) + "\n",
                    encoding="utf-8")
    print(f"wrote {path} ({len(rows)} replies, {path.stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
