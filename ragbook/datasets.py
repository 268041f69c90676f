"""Loaders for everything in ``data/``: the corpora, their labelled questions, reader sets,
and the synthetic ticket generator.

Two labelled retrieval sets, each a :class:`LabelledSet` (documents + questions + splits):

* ``load_helpcentre()`` — Brightdesk, a fictional SaaS help centre written for this book,
  with customer-style questions in seven categories;
* ``load_pydocs()`` — the Python documentation in sections, with the real Python FAQ
  questions as queries and the FAQ's own answer section as the gold label.

``qrels`` come out in the shape ``ragbook.evaluate`` (and ranx) consume:
``{query_id: {doc_id: relevance}}``.

>>> hc = load_helpcentre()                      # doctest: +SKIP
>>> len(hc.documents) >= 120, hc.splits()       # doctest: +SKIP
(True, {'train': ..., 'dev': ..., 'test': ...})
"""
from __future__ import annotations

import gzip
import json
import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from .text import sentences
from .types import Document, Hit

__all__ = ["Question", "LabelledSet", "ReaderExample", "data_dir", "load_helpcentre",
           "load_pydocs", "load_ninja", "load_reader_set", "ReadingTask", "load_reading_tasks",
           "generate_tickets", "split_front_matter", "CATEGORIES"]

CATEGORIES = ("paraphrase", "exact_token", "follow_up", "plausible_neighbour",
              "unanswerable", "superseded_trap", "conflict")
SPLITS = ("train", "dev", "test")


def data_dir() -> Path:
    """The repository's ``data/`` folder."""
    here = Path(__file__).resolve().parent.parent / "data"
    if not here.is_dir():
        raise FileNotFoundError(
            f"ragbook's data folder was not found at {here}; ragbook's loaders read the "
            f"data/ folder of a source checkout (install with `pip install -e .`)")
    return here


def recorded(name: str) -> dict:
    """A result the project recorded and a chapter prints (``data/results/NAME.json``): the
    retrieval floors the tests hold (``retrieval_floors``), a bench run too slow to repeat in
    a chapter (``generative``). Read through the package, so a notebook copied out of the
    repository still finds them."""
    path = data_dir() / "results" / f"{name}.json"
    if not path.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.json"))
        raise FileNotFoundError(f"no recorded result {name!r} in {path.parent}; recorded: "
                                f"{', '.join(known)}")
    return json.loads(path.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Question:
    """A labelled query. ``gold`` lists the ids of documents that answer it (empty for an
    unanswerable question); ``answers`` the verbatim answer spans ``{"doc", "text"}``.
    A follow-up carries the earlier ``turns`` and a ``condensed`` stand-alone rewrite."""

    id: str
    text: str
    category: str
    split: str
    gold: tuple[str, ...] = ()
    answers: tuple[Mapping[str, str], ...] = ()
    turns: tuple[Mapping[str, str], ...] = ()
    condensed: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def standalone(self) -> str:
        """The question as a retriever should see it: a follow-up's condensed rewrite,
        else the text itself (chapter 9 shows what happens without condensation)."""
        return self.condensed or self.text


@dataclass(frozen=True, eq=False)
class LabelledSet:
    """A corpus and its labelled questions."""

    name: str
    documents: tuple[Document, ...]
    questions: tuple[Question, ...]

    def doc(self, doc_id: str) -> Document:
        """The document with id ``doc_id``; ``KeyError`` naming the set when there is none."""
        try:
            return self._by_id()[doc_id]
        except KeyError:
            raise KeyError(f"no document {doc_id!r} in {self.name}") from None

    def _by_id(self) -> dict[str, Document]:
        return _index(self)

    def split(self, name: str, categories: Iterable[str] | None = None) -> list[Question]:
        """Questions of one split (``train``, ``dev`` or ``test``), optionally by category."""
        known = sorted({q.split for q in self.questions})
        if name not in known:
            raise ValueError(f"{self.name} has no split {name!r}; it has {', '.join(known)}")
        cats = set(categories) if categories is not None else None
        return [q for q in self.questions
                if q.split == name and (cats is None or q.category in cats)]

    def splits(self) -> dict[str, int]:
        """Number of questions per split, e.g. ``{'train': ..., 'dev': ..., 'test': ...}``."""
        counts: dict[str, int] = {}
        for q in self.questions:
            counts[q.split] = counts.get(q.split, 0) + 1
        return counts

    def qrels(self, split: str | None = None) -> dict[str, dict[str, int]]:
        """``{question id: {gold doc id: 1}}`` for answerable questions (those with gold ids);
        recall is undefined for a question with nothing to find, so unanswerables are left out."""
        qs = self.questions if split is None else self.split(split)
        return {q.id: {d: 1 for d in q.gold} for q in qs if q.gold}


@lru_cache(maxsize=8)
def _index(ds: LabelledSet) -> dict[str, Document]:
    return {d.id: d for d in ds.documents}


# -- help centre ---------------------------------------------------------------------------

_FRONT = re.compile(r"\A---[ \t]*\n(.*?)^(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S | re.M)


def split_front_matter(raw: str, source: str = "text") -> tuple[dict[str, str], str]:
    """``(metadata, body)`` of a Markdown text that may open with a front-matter block:
    ``---``, plain ``key: value`` lines (values kept as str, without surrounding quotes; blank
    and ``# comment`` lines skipped), ``---`` or ``...``. No block gives ``({}, raw)``; any
    other line (a YAML list) is an error naming ``source``: YAML is not parsed.

    >>> split_front_matter("---\\nstatus: 'current'\\n---\\n# Refunds\\n")
    ({'status': 'current'}, '# Refunds\\n')
    """
    meta, m = {}, _FRONT.match(raw)
    for line in (m.group(1) if m else "").splitlines():
        key, sep, value = line.partition(":")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not sep or not key.strip():
            raise ValueError(f"{source}: front-matter line {line!r} is not 'key: value'; "
                             f"write one 'key: value' per line between the '---' lines")
        meta[key.strip()] = re.sub(r"""\A(["'])(.*)\1\Z""", r"\2", value.strip())  # "a" -> a
    return meta, (raw[m.end():] if m else raw)


def _read_article(path: Path) -> Document:
    meta, body = split_front_matter(path.read_text(encoding="utf-8"), str(path))
    if not meta:
        raise ValueError(f"{path}: no front matter (a '---' block of key: value lines)")
    if meta.get("id") != path.stem:
        raise ValueError(f"{path}: front-matter id {meta.get('id')!r} differs from the file name")
    body = body.strip("\n") + "\n"
    return Document(id=meta.pop("id"), text=body, title=meta.pop("title", ""), metadata=meta)


def _read_jsonl(path: Path) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise ValueError(f"{path}:{n}: not valid JSON ({err})") from None
    return rows


@lru_cache(maxsize=2)
def load_helpcentre(include_superseded: bool = True) -> LabelledSet:
    """The Brightdesk help centre: articles as Documents (text = the markdown body, metadata
    = front matter) and the labelled customer questions of ``data/helpcentre/questions/``.

    ``include_superseded=False`` drops retired articles — what chapter 10's metadata filter
    does at query time; the default keeps them, since a real corpus contains them.
    """
    root = data_dir() / "helpcentre"
    docs = [_read_article(p) for p in sorted((root / "articles").glob("*.md"))]
    if not include_superseded:
        docs = [d for d in docs if d.metadata.get("status") != "superseded"]
    questions = _read_questions(sorted((root / "questions").glob("*.jsonl")))
    return LabelledSet("helpcentre", tuple(docs), questions)


def _read_questions(paths: Iterable[Path]) -> tuple[Question, ...]:
    """The labelled questions of JSONL files (unknown keys go to ``extra``), sorted by id."""
    questions = []
    for row in (dict(r) for path in paths for r in _read_jsonl(path)):
        questions.append(Question(
            id=row.pop("id"), text=row.pop("question"), category=row.pop("category"),
            split=row.pop("split"), gold=tuple(row.pop("gold", ())),
            answers=tuple(row.pop("answers", ())), turns=tuple(row.pop("turns", ())),
            condensed=row.pop("condensed", None), extra=row))
    return tuple(sorted(questions, key=lambda q: q.id))


@lru_cache(maxsize=1)
def load_ninja() -> LabelledSet:
    """The Ninja manual (``data/ninja``, 38 sections) no chapter uses, and hand-written
    questions with gold section and verbatim span (12 unanswerable): ``bench/unseen.py``."""
    root = data_dir() / "ninja"
    docs = [_read_article(p) for p in sorted((root / "manual").glob("*.md"))]
    return LabelledSet("ninja", tuple(docs), _read_questions([root / "questions.jsonl"]))


# -- Python docs ---------------------------------------------------------------------------

@lru_cache(maxsize=2)
def load_pydocs() -> LabelledSet:
    """Python documentation sections (Document per section: text = the section's own body,
    title = its heading, metadata = file and heading path) and the FAQ questions.

    Gold labels are stored as (file, heading) and resolved here, so a rebuilt corpus from a
    newer Python either finds the same section or fails loudly instead of shifting labels.
    """
    root = data_dir() / "pydocs"
    docs = []
    with gzip.open(root / "sections.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            s = json.loads(line)
            docs.append(Document(id=s["id"], text=s["text"], title=s["heading"],
                                 metadata={"file": s["file"], "path": tuple(s["path"])}))
    by_key: dict[tuple, list[str]] = {}
    for d in docs:
        path = d.metadata["path"]
        by_key.setdefault((d.metadata["file"], d.title), []).append(d.id)
        if len(path) >= 2:
            by_key.setdefault((d.metadata["file"], d.title, path[-2]), []).append(d.id)
    spans = {}
    if (root / "faq_spans.jsonl").exists():
        spans = {r["faq_id"]: r["answer"] for r in _read_jsonl(root / "faq_spans.jsonl")}
    questions = []
    for row in _read_jsonl(root / "faq.jsonl"):
        key = (row["file"], row["heading"]) + ((row["parent"],) if row.get("parent") else ())
        ids = by_key.get(key, [])
        if len(ids) != 1:
            raise ValueError(
                f"FAQ label {row['id']} ({key}) matches {len(ids)} sections, expected exactly 1; "
                f"rebuild data/pydocs with tools/build_pydocs.py or fix the label")
        answers = ({"doc": ids[0], "text": spans[row["id"]]},) if row["id"] in spans else ()
        questions.append(Question(id=row["id"], text=row["question"], category="faq",
                                  split=row["split"], gold=(ids[0],), answers=answers))
    return LabelledSet("pydocs", tuple(docs), tuple(questions))


# -- reader sets (SQuAD 2.0 format) --------------------------------------------------------

@dataclass(frozen=True)
class ReaderExample:
    """One SQuAD 2.0 question over one context: ``answers`` are ``(text, answer_start)``
    pairs with ``context[start:start+len(text)] == text``; empty when ``is_impossible``."""

    id: str
    question: str
    context: str
    answers: tuple[tuple[str, int], ...]
    is_impossible: bool
    title: str = ""


READER_SETS = ("helpcentre", "pydocs")


def load_reader_set(name: str = "all", split: str = "train") -> list[ReaderExample]:
    """Reader questions of ``data/reader/<name>-<split>.json`` (SQuAD 2.0 JSON). ``name`` is
    ``helpcentre``, ``pydocs`` or ``all``; ``split`` is ``train``, ``dev`` or ``test``."""
    if name not in READER_SETS + ("all",):
        raise ValueError(f"unknown reader set {name!r}; choose one of "
                         f"{', '.join(READER_SETS + ('all',))}")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    out = []
    for n in (READER_SETS if name == "all" else (name,)):
        with open(data_dir() / "reader" / f"{n}-{split}.json", encoding="utf-8") as fh:
            squad = json.load(fh)
        for article in squad["data"]:
            for para in article["paragraphs"]:
                for qa in para["qas"]:
                    out.append(ReaderExample(
                        id=qa["id"], question=qa["question"], context=para["context"],
                        answers=tuple((a["text"], a["answer_start"]) for a in qa["answers"]),
                        is_impossible=qa["is_impossible"], title=article["title"]))
    return out


@dataclass(frozen=True)
class ReadingTask:
    """A reader's job as retrieval hands it over: a question and two passages (``Hit``s).

    Answerable tasks hold the passage with the answer (``gold`` is its hit id) and a
    misleading neighbour, in a seeded random order; unanswerable tasks hold two passages
    that look relevant and do not answer (``gold`` is None, ``answers`` empty)."""

    id: str
    question: str
    passages: tuple[Hit, ...]
    answers: tuple[str, ...]
    gold: str | None


def load_reading_tasks(name: str = "helpcentre", split: str = "dev",
                       seed: int = 0) -> list[ReadingTask]:
    """The reader set's questions as two-passage reading tasks (see ``ReadingTask``).

    Each question's own misleading passage (its ``-neg`` example) is the neighbour when it
    has one, else the next question's that comes from another page and lacks the answer; an
    unanswerable task pairs its passage with the next question's misleading passage.
    Passages get descending scores in their shuffled order, so ranks look like a retriever's."""
    examples = load_reader_set(name, split)
    negs = [e for e in examples if e.is_impossible]
    neg_of = {e.id.rsplit("-", 1)[0]: e for e in negs}
    position = {e.id: j for j, e in enumerate(negs)}
    rng = random.Random(seed)
    tasks = []
    for i, ex in enumerate(examples):
        qid = ex.id.rsplit("-", 1)[0]
        if ex.is_impossible:
            nxt = negs[(position[ex.id] + 1) % len(negs)]
            pair = [(ex.id, ex), (nxt.id + "-other", nxt)]
        else:
            other = neg_of.get(qid) or next(
                n for n in negs[i % len(negs):] + negs[:i % len(negs)]
                if n.title != ex.title and not any(a in n.context for a, _ in ex.answers))
            pair = [(ex.id, ex), (other.id, other)]
        rng.shuffle(pair)
        hits = tuple(Hit(id=pid, score=round(1.0 - 0.1 * r, 2), rank=r + 1, doc_id=e.title,
                         text=e.context)
                     for r, (pid, e) in enumerate(pair))
        tasks.append(ReadingTask(ex.id, ex.question, hits, tuple(a for a, _ in ex.answers),
                                 None if ex.is_impossible else ex.id))
    return tasks


# -- synthetic tickets ---------------------------------------------------------------------

_FIRST = ["Ana", "Ben", "Chloé", "Dev", "Emre", "Fatima", "Gus", "Hana", "Ivan", "Jonas",
          "Kemi", "Lars", "Maya", "Nils", "Olu", "Priya", "Quinn", "Rosa", "Sami", "Tomás",
          "Uma", "Vik", "Wen", "Yara", "Zoe"]
_LAST = ["Okafor", "Lindqvist", "Moreau", "Patel", "Kowalski", "Haddad", "Nakamura", "Silva",
         "Schneider", "O'Brien", "Novak", "Rahman", "Costa", "Jensen", "Ito", "Mensah"]
_COMPANIES = ["Northwind Outfitters", "Kestrel Labs", "Bluefin Travel", "Orchard Health",
              "Pinecrest Schools", "Vela Logistics", "Copperline Energy", "Marlow & Finch",
              "Tidewater Bank", "Juniper Games", "Atlas Rentals", "Sundial Foods"]
_OPENERS = ["Hi team,", "Hello,", "Hi there,", "Good morning,", "Hey Brightdesk support,"]
_CONTEXT = [
    "We are a team of {agents} agents on the {plan} plan and have used Brightdesk for "
    "{years} years.",
    "I'm the admin of our workspace ({company}, {plan} plan, {agents} agents).",
    "Our support team at {company} ran into something this week and I could not find a "
    "clear answer.",
    "We moved to Brightdesk from another helpdesk {years} years ago; {agents} of us use it daily.",
]
_FOLLOWUPS = [
    "Thanks for the quick reply. To answer your questions: it happens for {n} of our agents, "
    "mostly in the mornings, and we are on {browser}. Nothing changed on our side as far "
    "as I know.",
    "Sure, here are the details you asked for. Workspace: {slug}. It started on {date}. "
    "We tried the usual things (signing out and in again, another browser) without luck.",
    "I checked with our IT team. They say our network setup has not changed since {date}, "
    "but they are happy to adjust something if you tell us exactly what.",
]
_CLOSERS = ["That did it, thank you!", "Perfect, all sorted now. Thanks for the help.",
            "Great, that answers it. You can close this one.",
            "Confirmed working on our side. Much appreciated."]


def _sentences(text: str) -> list[str]:
    body = re.sub(r"[#*`|>]", "", text)
    return [s for s in sentences(body) if len(s.split()) >= 6]


def generate_tickets(n: int = 12_000, seed: int = 0) -> list[Document]:
    """``n`` synthetic resolved support tickets (~800 tokens each), deterministic in ``seed``.

    Each ticket is a customer/agent thread whose resolution quotes one current help-centre
    article, recorded in ``metadata["resolved_by"]``. They exist to give chapters 0 and 11 a
    corpus of realistic *size*; being generated, they are never used for quality claims.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    articles = [d for d in load_helpcentre().documents if d.metadata.get("status") == "current"
                and d.metadata.get("access") != "internal"]
    pool = [(a, _sentences(a.text)) for a in articles]
    pool = [(a, s) for a, s in pool if len(s) >= 4]
    rng = random.Random(seed)
    by_dept: dict[str, list] = {}
    for a, sents in pool:
        by_dept.setdefault(a.metadata.get("department", ""), []).append((a, sents))
    tickets = []
    for i in range(n):
        article, sents = rng.choice(pool)
        dept = article.metadata.get("department", "")
        other, other_sents = rng.choice(by_dept[dept])
        first, last = rng.choice(_FIRST), rng.choice(_LAST)
        agent = rng.choice(_FIRST)
        fill = {"agents": rng.randint(2, 80),
                "plan": rng.choice(["Free", "Starter", "Pro", "Enterprise"]),
                "years": rng.randint(1, 6), "company": rng.choice(_COMPANIES),
                "n": rng.randint(1, 12),
                "browser": rng.choice(["Chrome", "Firefox", "Edge", "Safari"]),
                "slug": f"{rng.choice(_COMPANIES).split()[0].lower()}-{rng.randint(10, 99)}",
                "date": f"2026-{rng.randint(1, 10):02d}-{rng.randint(1, 28):02d}"}
        topic = article.title.lower()
        parts = [
            f"Ticket #{100000 + i} | channel: {rng.choice(['email', 'chat', 'web form'])} | "
            f"priority: {rng.choice(['low', 'normal', 'high'])} | created: {fill['date']} | "
            f"status: solved",
            f"Subject: Question about {topic}",
            f"Customer: {first} {last} "
            f"<{first.lower()}.{last.lower().replace(chr(39), '')}@example.com>",
            rng.choice(_OPENERS),
            rng.choice(_CONTEXT).format(**fill),
            f"We have a question about {topic}. " + " ".join(rng.sample(sents, 2)) +
            " Is that right in our case, and what should we do next?",
            f"{first} {last}\n{fill['company']}",
            f"Agent ({agent}): Thanks for reaching out, {first}. Before I answer, could you tell "
            "me how many people are affected, since when, and which browser or device you use?",
            rng.choice(_FOLLOWUPS).format(**fill),
            "Agent: Thanks, that helps. Here is what applies to you. "
            + " ".join(rng.sample(sents, min(len(sents), rng.randint(10, 16)))),
            "If anything is unclear, reply to this message and it will come straight back to me.",
            f"Customer: Thanks {agent}. One more thing while I have you: "
            + " ".join(rng.sample(other_sents, min(len(other_sents), 2)))
            + " Does that apply to us as well?",
            "Agent: Good question. "
            + " ".join(rng.sample(other_sents, min(len(other_sents), rng.randint(6, 10)))),
            f"Customer: {rng.choice(_CLOSERS)}",
            f"Internal note: resolved with the article \"{article.title}\" (follow-up answered "
            f"from \"{other.title}\"). Customer on {fill['plan']}, {fill['agents']} agents, "
            f"{fill['browser']}. Tags: {dept or 'general'}, {fill['plan'].lower()}.",
        ]
        text = "\n\n".join(parts)
        tickets.append(Document(id=f"ticket-{seed}-{i:05d}", text=text,
                                title=f"Question about {topic}",
                                metadata={"resolved_by": article.id, "plan": fill["plan"],
                                          "department": dept}))
    return tickets
