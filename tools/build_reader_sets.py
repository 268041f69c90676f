"""Build the SQuAD 2.0 reader sets in data/reader/ from the labelled retrieval sets.

Everything a reader example needs already exists, written by people: the question, the
document, and a verbatim answer span in it. This script only cuts a context window around
the span and computes ``answer_start``; the one constructed part is the unanswerable
contexts, made the way open-domain QA meets them — the question paired with a passage that
looks relevant but does not contain the answer:

* help centre, answerable: every question with an answer span (follow-ups use their
  condensed stand-alone form); the window is the answer's paragraph plus neighbours;
* help centre, unanswerable: ``unanswerable`` questions with the corpus window that shares
  most words with them, ``plausible_neighbour`` questions with the best window of the
  misleading neighbour article, and ``paraphrase`` / ``exact_token`` questions with the best
  window of another current article of the same department (ERR_CONN_4021 meets 4022);
* Python FAQ: each question with a span, once with its answer window and once (impossible)
  with the most word-sharing window of another FAQ answer.

Every impossible context is checked not to contain the gold span, nor most of its content
words (so the same fact restated on another page does not count as "no answer"). Splits follow the
questions' splits (Python FAQ train is divided 3:1 into train/dev by a hash of the id).

    python tools/build_reader_sets.py        # writes data/reader/{helpcentre,pydocs}-{split}.json
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ragbook.datasets import load_helpcentre, load_pydocs  # noqa: E402

MAX_WORDS = 220
STOP = set("""a an the and or but if of to in on for with at by from is are was were be been
it its this that these those i you we they he she my our your their me us do does did can
could would should will what which who how when where why not no yes have has had so as
about into than then there here just also any all some more most""".split())


def paragraphs(text: str) -> list[tuple[int, int]]:
    """(start, end) of each blank-line-separated block."""
    spans, pos = [], 0
    for block in re.split(r"(\n\s*\n)", text):
        if block.strip() and not re.fullmatch(r"\n\s*\n", block):
            spans.append((pos, pos + len(block)))
        pos += len(block)
    return spans


def words(text: str) -> int:
    return len(text.split())


def window_around(text: str, a: int, b: int) -> tuple[int, int]:
    """The paragraphs covering [a, b), grown by neighbours while under MAX_WORDS."""
    paras = paragraphs(text)
    first = next(i for i, (s, e) in enumerate(paras) if e > a)
    last = next(i for i, (s, e) in reversed(list(enumerate(paras))) if s < b)
    lo, hi = first, last
    while True:
        grown = False
        for cand in (lo - 1, hi + 1):
            if 0 <= cand < len(paras):
                nlo, nhi = min(lo, cand), max(hi, cand)
                if words(text[paras[nlo][0]:paras[nhi][1]]) <= MAX_WORDS:
                    lo, hi, grown = nlo, nhi, True
        if not grown:
            return paras[lo][0], paras[hi][1]


def content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9_]+", text.lower()) if w not in STOP and len(w) > 2}


def mentions(ctx: str, answer: str) -> bool:
    """True when ``ctx`` contains the answer verbatim or most of its content words (the
    same fact said again elsewhere must not become an 'unanswerable' context)."""
    if not answer:
        return False
    aw = content_words(answer)
    return answer in ctx or (bool(aw) and len(aw & content_words(ctx)) >= 0.6 * len(aw))


def best_window(question: str, docs, exclude: str) -> tuple[str, str] | None:
    """The (doc id, window text) sharing most content words with the question, avoiding
    any window that mentions the answer ``exclude``."""
    qw = content_words(question)
    best, best_score = None, 0.0
    for doc in docs:
        for s, e in paragraphs(doc.text):
            ws, we = window_around(doc.text, s, e)
            ctx = doc.text[ws:we]
            if mentions(ctx, exclude):
                continue
            score = len(qw & content_words(ctx))
            if score > best_score:
                best, best_score = (doc.id, ctx), score
    return best


def example(qid, question, ctx, answer, title):
    answers = []
    if answer is not None:
        start = ctx.index(answer)
        assert ctx[start:start + len(answer)] == answer
        answers = [{"text": answer, "answer_start": start}]
    return title, {"context": ctx, "qas": [{"id": qid, "question": question, "answers": answers,
                                           "is_impossible": answer is None}]}


def answerable(doc, span):
    a = doc.text.index(span)
    ws, we = window_around(doc.text, a, a + len(span))
    return doc.text[ws:we]


def build_helpcentre():
    hc = load_helpcentre()
    out = {s: [] for s in ("train", "dev", "test")}
    for q in hc.questions:
        text = q.condensed or q.text
        for i, ans in enumerate(q.answers[:1] if q.category != "conflict" else q.answers):
            doc = hc.doc(ans["doc"])
            out[q.split].append(example(f"{q.id}-a{i}", text, answerable(doc, ans["text"]),
                                        ans["text"], doc.title))
        if q.category == "unanswerable":
            found = best_window(text, hc.documents, exclude="")
        elif q.category == "plausible_neighbour":
            found = best_window(text, [hc.doc(q.extra["neighbour"])], exclude=q.answers[0]["text"])
        elif q.category in ("paraphrase", "exact_token"):
            dept = hc.doc(q.gold[0]).metadata["department"]
            others = [d for d in hc.documents if d.id not in q.gold
                      and d.metadata["department"] == dept and d.metadata["status"] == "current"]
            found = best_window(text, others, exclude=q.answers[0]["text"])
        else:
            found = None
        if found:
            out[q.split].append(example(f"{q.id}-neg", text, found[1], None,
                                        hc.doc(found[0]).title))
    return out


def build_pydocs():
    py = load_pydocs()
    faq_docs = [d for d in py.documents if d.metadata["file"].startswith("faq/")]
    out = {s: [] for s in ("train", "dev", "test")}
    for q in py.questions:
        if not q.answers:
            continue
        split = q.split
        if split == "train" and int(hashlib.sha1(q.id.encode()).hexdigest(), 16) % 4 == 0:
            split = "dev"
        ans = q.answers[0]
        doc = py.doc(ans["doc"])
        out[split].append(example(f"{q.id}-a0", q.text, answerable(doc, ans["text"]),
                                  ans["text"], doc.title))
        others = [d for d in faq_docs if d.id != doc.id]
        found = best_window(q.text, others, exclude=ans["text"])
        if found:
            out[split].append(example(f"{q.id}-neg", q.text, found[1], None,
                                      py.doc(found[0]).title))
    return out


def write(name, by_split):
    target = ROOT / "data" / "reader"
    target.mkdir(exist_ok=True)
    for split, items in by_split.items():
        data = [{"title": title, "paragraphs": [para]} for title, para in items]
        with open(target / f"{name}-{split}.json", "w", encoding="utf-8") as fh:
            json.dump({"version": "v2.0", "data": data}, fh, ensure_ascii=False, indent=1)
        n_imp = sum(p["qas"][0]["is_impossible"] for _, p in items)
        print(f"{name:10s} {split:5s} {len(items):4d} questions, {n_imp:4d} unanswerable")


if __name__ == "__main__":
    write("helpcentre", build_helpcentre())
    write("pydocs", build_pydocs())
