"""Chapter 12 (solutions/12-capstone.py): the learner's own corpus and ten labelled
questions, and an evaluation of a retriever on them; checked on the shipped package READMEs."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from .. import bm25, chunking, datasets, evaluate, ingest
from .core import Case, Chapter, describe, same, show

CHAPTER = Chapter("12-capstone")

_CAPSTONE_FLOOR = 0.5  # BM25 recall@5 the shipped corpus's questions must reach


def _pkgdocs_folder() -> Path:
    return datasets.data_dir() / "pkgdocs" / "readmes"


@lru_cache(maxsize=1)
def _pkgdocs() -> tuple:
    return tuple(ingest.read_documents(_pkgdocs_folder()))


@lru_cache(maxsize=2)
def _pkgdocs_bm25(chunked: bool):
    items = (chunking.chunk_documents(_pkgdocs(), size=1500, overlap=150, length="chars")
             if chunked else _pkgdocs())
    return bm25.BM25Index().build(items)


def _capstone_problem(result) -> str | None:
    """What is wrong with a (folder, questions) pair, or None."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        return "expected a pair (folder, questions)"
    folder, questions = result
    if not isinstance(folder, (str, Path)) or not Path(folder).is_dir():
        return f"the folder {show(folder, 80)} is not a folder on this machine"
    try:
        doc_texts = {d.id: d.text for d in ingest.read_documents(folder)}  # PDFs: extracted
    except Exception as err:
        return f"read_documents could not read the folder: {describe(err)}"
    if not isinstance(questions, list) or len(questions) != 10:
        return "expected a list of exactly 10 questions"
    texts = set()
    for n, q in enumerate(questions, 1):
        if not isinstance(q, dict) or not isinstance(q.get("question"), str) or \
                not q["question"].strip() or not isinstance(q.get("gold"), str):
            return f"question {n} must be a dict with a non-empty 'question' and a 'gold' file"
        if q["question"].strip().lower() in texts:
            return f"question {n} repeats an earlier question"
        texts.add(q["question"].strip().lower())
        path = Path(folder) / q["gold"]
        gold_id = Path(q["gold"]).with_suffix("").as_posix()
        if not path.is_file() or gold_id not in doc_texts:
            return (f"question {n}: gold file {q['gold']!r} is not a document of the folder; "
                    f"give its path relative to the folder, suffix included")
        passage = q.get("passage")
        if passage is not None:
            text = " ".join(doc_texts[gold_id].split())
            if not isinstance(passage, str) or " ".join(passage.split()) not in text:
                return f"question {n}: the passage is not in {q['gold']} (copy it verbatim)"
    if Path(folder).resolve() == _pkgdocs_folder().resolve():
        qrels = {f"q{n}": {Path(q["gold"]).with_suffix("").as_posix(): 1}
                 for n, q in enumerate(questions)}
        run = evaluate.retrieve_run(_pkgdocs_bm25(False),
                                    [(f"q{n}", q["question"]) for n, q in enumerate(questions)],
                                    k=5)
        recall = evaluate.evaluate(qrels, run, "recall@5")
        if recall < _CAPSTONE_FLOOR:
            return (f"BM25 finds only {recall:.0%} of your gold files in its top 5 (the floor "
                    f"is {_CAPSTONE_FLOOR:.0%}); check the labels, or make the questions "
                    f"specific enough to have one answering file")
    return None


@CHAPTER.exercise("my_corpus_and_questions",
                  "return (folder, questions): a folder of documents (.md, .txt, .pdf, .html, "
                  ".docx) and a list of 10 dicts, "
                  "each with 'question', 'gold' (a file path relative to the folder) and, "
                  "ideally, 'passage' (text copied from that file)")
def my_corpus_and_questions_cases():
    """One call, its (folder, questions) checked for a readable folder, ten distinct
    questions with real gold files and verbatim passages (and, on the shipped corpus, a
    BM25 recall@5 of at least 0.5)."""
    yield Case((), verify=_capstone_problem)


def _title_questions(n: int | None = None) -> list[dict]:
    """Questions the grader makes from the shipped corpus: each file's title, gold = that file."""
    return [{"question": d.title, "gold": f"{d.id}.md"} for d in _pkgdocs()[:n]]


def _same_metrics(expected: dict):
    """A verify for a {metric: value} dict: same keys, values within 1e-9."""
    def verify(got):
        if not isinstance(got, dict) or set(got) != set(expected) or not all(
                same(got[m], v, 1e-9) for m, v in expected.items()):
            return f"expected: {show(expected)}\n  got:      {show(got)}"
        return None
    return verify


@CHAPTER.exercise("evaluate_retriever",
                  "qrels = {question id: {gold id: 1}} with gold id = the file path without "
                  "suffix; run = retrieve_run(retriever, [(question id, text), ...], k=k, "
                  "level='doc'); return evaluate(qrels, run, [f'recall@{k}', f'mrr@{k}'])")
def evaluate_retriever_cases():
    """The shipped READMEs' titles as questions, against a whole-file and a chunked BM25
    index, at k = 1, 3, 5, 10."""
    for chunked, n, k in ((False, None, 1), (False, 8, 3), (True, None, 5), (True, None, 10)):
        questions = _title_questions(n)
        qrels = {f"q{i}": {q["gold"][:-3]: 1} for i, q in enumerate(questions)}
        run = evaluate.retrieve_run(_pkgdocs_bm25(chunked),
                                    [(f"q{i}", q["question"]) for i, q in enumerate(questions)],
                                    k=k)
        yield Case((_pkgdocs_bm25(chunked), questions, k),
                   verify=_same_metrics(evaluate.evaluate(qrels, run, [f"recall@{k}", f"mrr@{k}"])))
