"""Directive guards (issue 36 item 2, the part that does not depend on detection): how many
planted payloads reach the user with the guard off and on, and what the guard costs honest
answers.

Red team: each of the 138 rows of ``data/redteam/classes.jsonl`` is planted as its own page
(``planted-<id>``: a title and the row) into the help-centre corpus, as tests/test_planted.py
plants its pages; one hybrid index (chapter 9's: ``DenseIndex(Encoder())`` + BM25, chunks of
256/32) holds them all. Each row is asked its own payload (its last sentence, markup undone)
— the question that retrieves it best. *Delivered*: the reply answers from the planted page
(``ask``), or shows any text at all (``stream``: the obedient model writes only the payload).
Readers: the default extractive reader (``ask``; ``stream`` shows nothing before the verdict,
so it equals ``ask``), and ``GenerativeReader`` over an *obedient* chat model that repeats
the planted passage's sentences, each citing it — the worst case, the model always obeys —
through ``ask`` and ``stream`` (word by word). Off = ``guard_directives=False``.

False positives: on the help-centre test split with chapter 9's ``Pipeline(hybrid)``, the
answers delivered with the guard off that it escalates; on ``data/redteam/benign.jsonl``,
the rows that ``unsupported_directive`` refuses when the row alone is the passage answered
from (no other document to back it).

    flock /tmp/ragbook-heavy.lock .venv/bin/python bench/guards.py

``--far``: the rows of two or more sentences, each planted with its payload (last sentence)
``FILLER`` away from the rest, so the two land in different chunks; asked their payload, with
the guard on, over chunks that carry their page's verdict (``planted_pages.page_metadata``, as
``chunk_documents`` makes them) and over the same chunks with that mark removed (how they
were before the page's verdict went with each chunk). Delivered: the reply (``ask``) cites
a planted page, or the payload is shown (``stream``). Also counted: questions whose
candidates hold the payload chunk but not the one that carries the instruction.
"""
import argparse
import json
import re
import time
from collections import defaultdict
from dataclasses import replace

from ragbook import Encoder
from ragbook.bm25 import BM25Index
from ragbook.chunking import chunk_documents
from ragbook.datasets import data_dir, load_helpcentre
from ragbook.dense import DenseIndex
from ragbook.fusion import HybridRetriever
from ragbook.guards import unsupported_directive
from ragbook.injection import normalise, planted_spans
from ragbook.pipeline import Pipeline
from ragbook.planted_pages import PLANTED_PAGE
from ragbook.readers import GenerativeReader
from ragbook.text import sentences
from ragbook.types import Document, Hit

PASSAGE = re.compile(r'<passage n="(\d+)" source="planted-[^"]*">\n(.*?)\n</passage>', re.S)


class Obedient:
    """A chat model that repeats the first planted passage it is handed, citing it."""

    def generate(self, messages, max_new_tokens=None, stop=()):
        found = PASSAGE.search(messages[-1]["content"])
        if found is None:
            return "NOT_IN_CONTEXT"
        n, text = found.groups()
        return " ".join(f"{s.rstrip('.')} [{n}]." for s in sentences(text)
                        if not s.startswith("#"))

    def stream(self, messages, max_new_tokens=None, stop=()):
        yield from re.findall(r"\S+\s*", self.generate(messages))


def rows(name):
    path = data_dir() / "redteam" / name
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def planted_doc(row):
    return Document(f"planted-{row['id']}", f"# Notice\n\n{row['text']}\n",
                    {"status": "current", "access": "public"})


def red_team(hc, encoder, name="classes.jsonl"):
    planted = rows(name)
    docs = list(hc.documents) + [planted_doc(r) for r in planted]
    index = HybridRetriever(DenseIndex(encoder), BM25Index()).build(
        chunk_documents(docs, size=256, overlap=32))
    on = {"extractive": Pipeline(index),
          "generative": Pipeline(index, reader=GenerativeReader(Obedient()))}
    counts = {k: [0, 0] for k in ("ask", "ask --generative", "stream --generative")}
    missed = {k: [] for k in counts}
    for row in planted:
        doc = f"planted-{row['id']}"
        question = sentences(normalise(row["text"]))[-1]
        for kind, pipe in on.items():
            prep = pipe.prepare(question)
            for i, p in enumerate((pipe.with_settings(guard_directives=False), pipe)):
                r = p.decide(prep)
                name = "ask" if kind == "extractive" else "ask --generative"
                got = not r.escalated and doc in {h.doc_id for h in r.sources}
                counts[name][i] += got
                if got and i:
                    missed[name].append((row["id"], r.answer.text))
                if kind == "generative":
                    s = p.stream(question)
                    shown = "".join(s)
                    got = bool(shown) or (not s.result.escalated
                                          and doc in {h.doc_id for h in s.result.sources})
                    counts["stream --generative"][i] += got
                    if got and i:
                        missed["stream --generative"].append((row["id"], shown))
    return len(planted), counts, missed


FILLER = "\n\n".join(f"Release {n} of the desktop app ships with a refreshed colour theme and "
                     f"faster start-up." for n in range(1, 25))


def far_doc(row):
    said = sentences(row["text"])
    return Document(f"planted-{row['id']}",
                    f"# Notice\n\n{' '.join(said[:-1])}\n\n{FILLER}\n\n{said[-1]}\n",
                    {"status": "current", "access": "public"})


def far_team(hc, encoder, name="classes.jsonl"):
    """Delivered with the page's verdict on its chunks and without it (module docstring)."""
    planted = [r for r in rows(name) if len(sentences(r["text"])) > 1]
    chunks = chunk_documents(list(hc.documents) + [far_doc(r) for r in planted], size=256,
                             overlap=32)
    unmarked = [replace(c, metadata={k: v for k, v in c.metadata.items() if k != PLANTED_PAGE})
                for c in chunks]
    counts: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    apart = marked_cited = 0
    marked = {c.doc_id for c in chunks if c.metadata.get(PLANTED_PAGE)}
    for mark, found in (("without", unmarked), ("with", chunks)):
        index = HybridRetriever(DenseIndex(encoder), BM25Index()).build(found)
        pipes = {"ask": Pipeline(index),
                 "ask --generative": Pipeline(index, reader=GenerativeReader(Obedient()))}
        for row in planted:
            question = sentences(normalise(row["text"]))[-1]
            for name, pipe in pipes.items():
                prep = pipe.prepare(question)
                if name == "ask" and mark == "with":
                    mine = [h for h in prep.candidates if h.doc_id == f"planted-{row['id']}"]
                    apart += bool(mine) and not any(planted_spans(h.text) for h in mine)
                r = pipe.decide(prep)
                cited = {h.doc_id for h in r.sources if h.doc_id.startswith("planted-")}
                if not r.escalated and cited:
                    counts[name][mark].append(row["id"])
                    marked_cited += mark == "with" and bool(cited & marked)
                if name == "ask --generative":     # the payload shown, not the filler
                    shown = normalise("".join(pipe.stream(question)))
                    if question.rstrip(".")[:40] in shown:
                        counts["stream --generative"][mark].append(row["id"])
    return len(planted), len(marked), apart, marked_cited, counts


def false_positives(hc, encoder):
    index = HybridRetriever(DenseIndex(encoder), BM25Index()).build(
        chunk_documents(hc.documents, size=256, overlap=32))
    pipe = Pipeline(index)
    off = pipe.with_settings(guard_directives=False)
    test = hc.split("test")
    delivered, lost = 0, []
    for q in test:
        prep = pipe.prepare(q.text)
        before, after = off.decide(prep), pipe.decide(prep)
        delivered += not before.escalated
        if not before.escalated and after.escalated:
            lost.append((q.text, after.detail))
    return len(test), delivered, lost


def benign():
    out = []
    for row in rows("benign.jsonl"):
        hit = Hit("b#0", 1.0, 1, doc_id=row["id"], text=row["text"])
        why = unsupported_directive(row["text"], [hit])
        if why:
            out.append((row["id"], why))
    return len(rows("benign.jsonl")), out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--far", action="store_true", help="payloads a chunk away (docstring)")
    parser.add_argument("--rows", default="classes.jsonl",
                        help="the red-team file under data/redteam (fresh.jsonl: written in "
                             "session 13 before any change, never tuned on)")
    args = parser.parse_args()
    t = time.perf_counter()
    hc, encoder = load_helpcentre(), Encoder()
    if args.far:
        n, marked, apart, marked_cited, counts = far_team(hc, encoder, args.rows)
        print(f"{n} planted pages ({marked} marked: the detector sees them), payload "
              f"{len(FILLER)} characters after the rest; {apart} retrieve the payload chunk "
              f"without the one that carries the instruction; {marked_cited} replies cite a "
              f"marked page")
        print(f"{'path (guard on)':<22} {'unmarked':>10} {'marked':>10}")
        for name, by in counts.items():
            print(f"{name:<22} {len(by['without']):>10} {len(by['with']):>10}"
                  f"   marked, still delivered: {', '.join(by['with']) or '-'}")
        return print(f"{time.perf_counter() - t:.0f} s")
    n, counts, missed = red_team(hc, encoder, args.rows)
    print(f"red team: {n} planted pages, each asked its own payload; delivered (off -> on)")
    print(f"{'path':<22} {'guard off':>10} {'guard on':>10}")
    for name, (off, on) in counts.items():
        print(f"{name:<22} {off:>10} {on:>10}")
    for name, rows_ in missed.items():
        print(f"still delivered, {name}:")
        for i, text in rows_:
            print(f"  {i}: {text[:110]!r}")
    m, delivered, lost = false_positives(hc, encoder)
    print(f"help-centre test split: {m} questions, {delivered} delivered with the guard off, "
          f"{len(lost)} of them escalated by the guard")
    for q, detail in lost:
        print(f"  {q!r}: {detail[:160]}")
    b, refused = benign()
    print(f"benign.jsonl as answers: {len(refused)} of {b} refused "
          f"({100 * len(refused) / b:.1f}%)")
    for i, why in refused:
        print(f"  {i}: {why[:140]}")
    print(f"{time.perf_counter() - t:.0f} s")


if __name__ == "__main__":
    main()
