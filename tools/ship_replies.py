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
import json
import sqlite3
import sys

from shipping import arguments, verdict

from ragbook.llm import LocalLLM
from ragbook.shipped import ShippedReplies, replies_file

PROBE = {"messages": [{"role": "user", "content": "Which city is the capital of France?"}],
         "max_new_tokens": 12, "stop": []}


def main() -> int:
    args = arguments(__doc__, "the RAGBOOK_CACHE folder of a run of the book's LLM chapters",
                     "generator's replies")
    llm = LocalLLM(cache=False)
    path = replies_file(llm.identity)
    if args.check:
        return verdict(path, ShippedReplies(path).verify(llm._run))
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
