"""Graded exercises: ``check("name", your_function)`` runs every case of a named exercise
against your function and prints how many failed; for the first that failed, the input,
what was expected, what you returned (or raised), and a hint. When your answers match a
common mistake (a wrong variant the exercise knows), it names the mistake and what to
check. It never raises, so a notebook keeps running.

Expected values come from the ``ragbook`` implementation of the same idea: the package is
the answer key. Each exercise is a small function here that yields cases; its ``mistakes``
are the wrong keys, small functions that compute what a common mistake gives.

The first line of every report has a fixed shape that tools read::

    [check] window_count: PASSED (8/8 cases)
    [check] window_count: FAILED (2 of 8 cases)
    [check] window_count: NOT IMPLEMENTED (replace `raise NotImplementedError` ...)
    [check] windw_count: UNKNOWN exercise; known ones: ...

``trying("name")`` is for the ungraded "Try it" cells: it turns a learner's unfinished or
broken function into one line of advice instead of a traceback.
"""
from __future__ import annotations

import contextlib
import copy
import math
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["check", "trying", "Case", "Mistake", "EXERCISES"]


@dataclass
class Case:
    """One call of the learner's function: ``args`` in, ``expected`` out (compared with
    ``compare``), or a ``verify(result) -> error message | None`` for property checks."""

    args: tuple
    expected: Any = None
    verify: Callable[[Any], str | None] | None = None
    kwargs: dict = field(default_factory=dict)


@dataclass
class Mistake:
    """A common wrong answer: ``wrong`` takes the learner's arguments and returns (or raises)
    what that mistake gives; ``advice`` says what to check. Reported when the learner's
    results equal ``wrong``'s on every case where ``wrong`` is wrong (at least one)."""

    name: str
    advice: str
    wrong: Callable


@dataclass
class Exercise:
    name: str
    hint: str
    cases: Callable[[], Iterator[Case]]
    tolerance: float = 1e-6
    mistakes: tuple[Mistake, ...] = ()


EXERCISES: dict[str, Exercise] = {}


def exercise(name: str, hint: str, tolerance: float = 1e-6, mistakes: tuple[Mistake, ...] = ()):
    def register(fn: Callable[[], Iterator[Case]]):
        EXERCISES[name] = Exercise(name, hint, fn, tolerance, tuple(mistakes))
        return fn
    return register


def _same(got, expected, tol: float) -> bool:
    if isinstance(expected, (float, np.floating)) or isinstance(got, (float, np.floating)):
        try:
            a, b = float(got), float(expected)
        except (TypeError, ValueError):
            return False
        return math.isclose(a, b, rel_tol=tol, abs_tol=tol) or (math.isnan(a) and math.isnan(b))
    if isinstance(expected, np.ndarray):
        got = np.asarray(got)
        return got.shape == expected.shape and np.allclose(got, expected, atol=tol, equal_nan=True)
    if isinstance(expected, (list, tuple)):
        if isinstance(got, np.ndarray):  # np.argsort(...)[:k] is as good as a list of ints
            got = got.tolist()
        return (isinstance(got, (list, tuple)) and len(got) == len(expected)
                and all(_same(g, e, tol) for g, e in zip(got, expected, strict=True)))
    return got == expected


def _describe(err: BaseException) -> str:
    """``TypeError: message``, safe even when the exception's own ``str`` fails."""
    return traceback.format_exception_only(type(err), err)[-1].strip()


def _show(value, limit: int = 300) -> str:
    try:
        text = repr(value)
    except Exception as err:  # a learner's object with a broken __repr__ is still feedback
        text = f"<{type(value).__name__} object; repr() raised {type(err).__name__}>"
    return text if len(text) <= limit else text[:limit] + " ..."


@dataclass
class _Outcome:
    """What one call gave: a result, or the exception it raised."""

    result: Any = None
    error: BaseException | None = None


def _call(fn: Callable, case: Case) -> _Outcome:
    # copies: a function that edits its input in place must not change later cases
    try:
        return _Outcome(fn(*copy.deepcopy(case.args), **copy.deepcopy(case.kwargs)))
    except NotImplementedError:
        raise
    except (Exception, SystemExit) as err:  # the learner's bug: feedback, not a crash
        return _Outcome(error=err)


def _problem(out: _Outcome, case: Case, tol: float) -> str | None:
    """None when ``out`` is right for ``case``, else the lines that say what was wrong."""
    if out.error is not None:
        return f"raised:   {_describe(out.error)}"
    got = out.result
    try:
        if case.verify:
            problem = case.verify(got)
            if problem and "got:" not in problem:  # a property check: show the result too
                problem = f"got:      {_show(got)}\n  problem:  {problem}"
            return problem or None
        if bool(_same(got, case.expected, tol)):
            return None
        return f"expected: {_show(case.expected)}\n  got:      {_show(got)}"
    except Exception as err:  # a result of the wrong kind (None, an array, ...): feedback too
        return f"got:      {_show(got)}, which could not be checked ({_describe(err)})"


def _alike(a: _Outcome, b: _Outcome, tol: float) -> bool:
    """Both raised the same kind of exception, or both returned equal results."""
    if a.error is not None or b.error is not None:
        return a.error is not None and b.error is not None and type(a.error) is type(b.error)
    try:
        return bool(_same(a.result, b.result, tol))
    except Exception:
        return False


def _matching_mistakes(ex: Exercise, cases: list[Case], outcomes: list[_Outcome]) -> list[Mistake]:
    """The mistakes whose wrong answers the learner gave on every case they make wrong."""
    found = []
    for mistake in ex.mistakes:
        try:
            wrong = [_call(mistake.wrong, c) for c in cases]
        except NotImplementedError:
            continue
        differs = [i for i, (w, c) in enumerate(zip(wrong, cases, strict=True))
                   if _problem(w, c, ex.tolerance)]
        if differs and all(_alike(outcomes[i], wrong[i], ex.tolerance) for i in differs):
            found.append(mistake)
    return found


def check(name: str, fn: Callable) -> bool:
    """Run exercise ``name`` against ``fn``; print feedback; return True when all cases pass.

    Never raises: whatever ``fn`` does (raises, returns None, a wrong type, NaN), the
    outcome is a printed report and False. Only a keyboard interrupt gets through."""
    if not isinstance(name, str) or name not in EXERCISES:
        print(f"[check] {_show(name, 80)}: UNKNOWN exercise; known ones: "
              f"{', '.join(sorted(EXERCISES))}")
        return False
    ex = EXERCISES[name]
    try:
        cases = list(ex.cases())
    except Exception as err:  # a bug in the grader or the package, not the learner's
        print(f"[check] {name}: FAILED (the grader could not build its cases: "
              f"{_describe(err)}); this is not your code's fault, please report it")
        return False
    total = len(cases)
    if not callable(fn):
        print(f"[check] {name}: FAILED ({total} of {total} cases)\n  got:      {_show(fn, 80)}, "
              f"which is not a function; pass the function itself, without calling it\n"
              f"  hint:     {ex.hint}")
        return False
    try:
        outcomes = [_call(fn, case) for case in cases]
    except NotImplementedError:
        print(f"[check] {name}: NOT IMPLEMENTED (replace `raise NotImplementedError` "
              f"with your code; its message is a first hint)")
        return False
    problems = [_problem(out, c, ex.tolerance) for out, c in zip(outcomes, cases, strict=True)]
    failed = [n for n, p in enumerate(problems) if p]
    if not failed:
        print(f"[check] {name}: PASSED ({total}/{total} cases)")
        return True
    first = failed[0]
    case = cases[first]
    call = ", ".join([_show(a, 80) for a in case.args] +
                     [f"{k}={_show(v, 80)}" for k, v in case.kwargs.items()])
    lines = [f"[check] {name}: FAILED ({len(failed)} of {total} cases)",
             f"  first failing case ({first + 1} of {total}):",
             f"  input:    {call}", f"  {problems[first]}"]
    named = dict.fromkeys(f"  mistake:  your answer matches {m.name} — check {m.advice}"
                          for m in _matching_mistakes(ex, cases, outcomes))
    lines += list(named)
    lines.append(f"  hint:     {ex.hint}")
    print("\n".join(lines))
    return False


def _listing(names: tuple[str, ...], last: str) -> str:
    """``a``, ``a and b``, ``a, b and c`` (with ``last`` for "and"/"or")."""
    return f" {last} ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def _culprit(err: BaseException, names: tuple[str, ...]) -> str | None:
    """The innermost of ``names`` that the exception passed through, if any."""
    inside = [f.name for f in traceback.extract_tb(err.__traceback__) if f.name in names]
    return inside[-1] if inside else None


@contextlib.contextmanager
def trying(*names: str):
    """For an ungraded "Try it" cell that uses your functions ``names``: run the cell's
    body; when one of them is not written yet or fails, print one line that says which and
    what went wrong, instead of a traceback.

    >>> with trying("recall_at_k"):
    ...     raise NotImplementedError
    complete recall_at_k first
    """
    names = names or ("the exercises above",)
    try:
        yield
    except NotImplementedError as err:
        print(f"complete {_culprit(err, names) or _listing(names, 'and')} first")
    except Exception as err:  # the learner's bug: one line of advice, no traceback
        fn = _culprit(err, names)
        if fn:
            print(f"{fn} raised {_describe(err)}; run its check cell above to see the failing "
                  f"case")
        else:  # raised in the cell itself, on what the functions returned
            print(f"{_describe(err)}, using what {_listing(names, 'or')} returned; run "
                  f"{'its check cell' if len(names) == 1 else 'their check cells'} above to see "
                  f"the failing case")


# ---------------------------------------------------------------------------------------
# Chapter 0: the cost arithmetic
from . import cost as _cost  # noqa: E402

_WORKLOADS = [_cost.Workload(), _cost.Workload(corpus_docs=1_000, tokens_per_doc=300),
              _cost.Workload(corpus_docs=50_000, tokens_per_doc=1_200, price_per_million=0.5,
                             parallelism=64, k=8),
              _cost.Workload(corpus_docs=7, parallelism=3, k=2)]


@exercise("naive_tokens", "every question sends every document: docs x tokens per doc")
def _():
    for w in _WORKLOADS:
        yield Case((w.corpus_docs, w.tokens_per_doc), _cost.naive(w).input_tokens)


@exercise("naive_dollars", "tokens / 1,000,000 x price per million",
          mistakes=(Mistake("a price per token", "the price is per million tokens: divide the "
                            "token count by 1,000,000", lambda docs, tokens, price:
                            docs * tokens * price),))
def _():
    for w in _WORKLOADS:
        yield Case((w.corpus_docs, w.tokens_per_doc, w.price_per_million), _cost.naive(w).dollars)


@exercise("parallel_latency",
          "calls run in waves of `parallelism`; a last, partial wave still takes a full call "
          "(math.ceil)",
          mistakes=(Mistake("waves not rounded up", "a last, partial wave still takes a whole "
                            "call: math.ceil(docs / parallelism) waves",
                            lambda docs, par, latency: docs / par * latency),
                    Mistake("waves rounded down", "// drops the last, partial wave; it still "
                            "takes a whole call: math.ceil",
                            lambda docs, par, latency: docs // par * latency)))
def _():
    for w in _WORKLOADS:
        yield Case((w.corpus_docs, w.parallelism, w.call_latency_s),
                   _cost.naive(w).latency_parallel_s)


@exercise("cost_of_k", "the reader reads k documents once: k x tokens per doc x price / 1e6")
def _():
    for w in _WORKLOADS:
        for k in (1, w.k, min(w.corpus_docs, 20)):
            w2 = _cost.Workload(corpus_docs=w.corpus_docs, tokens_per_doc=w.tokens_per_doc,
                                price_per_million=w.price_per_million, k=k)
            yield Case((k, w.tokens_per_doc, w.price_per_million),
                       _cost.retriever_reader(w2).dollars)


# -- chapter 0 on the real corpus. Real-corpus material is loaded once per process: a check
# rebuilds its cases on every call, and a help-centre BM25 index takes a moment to build.
from functools import lru_cache as _lru_cache  # noqa: E402
from pathlib import Path as _Path  # noqa: E402

from . import bm25 as _bm25  # noqa: E402
from . import datasets as _datasets  # noqa: E402
from . import ingest as _ingest  # noqa: E402


@_lru_cache(maxsize=1)
def _hc_bm25():
    return _bm25.BM25Index().build(_datasets.load_helpcentre().documents)


@_lru_cache(maxsize=1)
def _hc_tokens() -> dict:
    """Encoder tokens of every help-centre article, by id."""
    return {d.id: _chunking.count_tokens(d.text) for d in _datasets.load_helpcentre().documents}


def _hc_questions(n: int = 3) -> list:
    """The first ``n`` answerable questions of the help centre's dev split."""
    return [q for q in _datasets.load_helpcentre().split("dev") if q.gold][:n]


def _hc_ranking(text: str, k: int = 10) -> list[str]:
    """Help-centre article ids, best first, as BM25 ranks them for ``text``."""
    return [h.id for h in _hc_bm25().search(text, k=k)]


def _predicted(actual, ok: Callable[[float], bool], tolerance: str):
    """A verify for a number the learner predicted: it must be a number for which
    ``ok(number)`` holds; the report names the actual value and the tolerance."""
    def verify(got):
        if isinstance(got, bool) or not isinstance(got, (int, float, np.integer, np.floating)) \
                or not math.isfinite(float(got)):
            return "expected a number: your prediction, written before you run the next cell"
        if ok(float(got)):
            return None
        return f"expected: {actual:g} ({tolerance})\n  got:      {_show(got)}"
    return verify


@exercise("reader_bill",
          "the reader reads the first k articles of the ranking (fewer if it is shorter): sum "
          "their token counts, then x price per million / 1,000,000")
def _():
    for q in _hc_questions(3):
        counts = [_hc_tokens()[d] for d in _hc_ranking(q.text, 10)]
        for k, price in ((1, 3.0), (5, 3.0), (20, 0.5)):
            yield Case((counts, k, price), _cost.context_tokens(counts, k) * price / 1_000_000)


def _naive_ratio() -> float:
    q = _hc_questions(1)[0]
    top5 = sum(_hc_tokens()[d] for d in _hc_ranking(q.text, 5))
    return sum(_hc_tokens().values()) / top5


@exercise("predict_naive_ratio",
          "every article's tokens against the 5 retrieved ones: with equal lengths that is the "
          "number of articles / 5; retrieved articles are rarely average")
def _():
    actual = _naive_ratio()
    yield Case((), verify=_predicted(actual, lambda p: actual / 2 <= p <= actual * 2,
                                     "a prediction within a factor of 2 passes"))


# ---------------------------------------------------------------------------------------
# Chapter 1: chunking
from . import chunking as _chunking  # noqa: E402

_WINDOWS = [(100_000, 500, 0), (100_000, 500, 100), (100_000, 500, 250), (500, 500, 50),
            (501, 500, 50), (120, 500, 0), (0, 10, 2), (1_000, 100, 99)]


@exercise("window_count",
          "no text, no window; one window if it all fits; otherwise count how many strides "
          "(size - overlap) the remaining total - size needs, rounding up, plus the first window",
          mistakes=(Mistake("a stride of size", "neighbours share `overlap` tokens, so each "
                            "window starts size - overlap after the one before",
                            lambda total, size, overlap: _chunking.window_count(total, size)),
                    Mistake("the rough count ceil(total / stride)", "the first window covers "
                            "size tokens; only the remaining total - size need strides",
                            _chunking.rough_window_count),
                    Mistake("strides rounded down", "a last, partial stride still needs a "
                            "window: math.ceil, not //", lambda total, size, overlap:
                            0 if total <= 0 else 1 if total <= size
                            else (total - size) // (size - overlap) + 1)))
def _():
    for args in _WINDOWS:
        yield Case(args, _chunking.window_count(*args))


@exercise("rough_window_count", "ceil(total / stride), with stride = size - overlap",
          mistakes=(Mistake("a stride of size", "the stride is size - overlap",
                            lambda total, size, overlap:
                            _chunking.rough_window_count(total, size)),))
def _():
    for args in _WINDOWS:
        yield Case(args, _chunking.rough_window_count(*args))


@exercise("sliding_windows",
          "start at 0, step by the stride, stop after the window that reaches n_tokens; "
          "the last window ends exactly at n_tokens",
          mistakes=(Mistake("a stride of size", "each window starts size - overlap after the "
                            "one before", lambda n, size, overlap:
                            [tuple(w) for w in _chunking.sliding_windows(n, size)]),))
def _():
    for n, size, overlap in _WINDOWS[3:] + [(10, 4, 1), (9, 3, 0)]:
        yield Case((n, size, overlap),
                   [tuple(w) for w in _chunking.sliding_windows(n, size, overlap)])


_SPLIT_TEXTS = [
    "Refunds take 5 to 10 business days. They go back to the original card.\n\n"
    "Enterprise annual contracts carry a 14-day refund window measured from the invoice "
    "date. Monthly plans carry 30 days.",
    "Short.",
    "One two three four five six seven eight nine ten eleven twelve thirteen fourteen.",
    "# Title\n\nA first paragraph that is long enough to need splitting into more than one "
    "piece of text.\n\nA second paragraph.\n\nA third one, with a sentence. And another.",
]


def _verify_split(text: str, size: int):
    return lambda result: _chunking.split_problem(text, result, size)


@exercise("split_with_offsets",
          "cut at the last paragraph break that fits, else the last sentence end, else the last "
          "space; return (start, end) offsets so text[start:end] is the chunk, whitespace trimmed")
def _():
    for text in _SPLIT_TEXTS:
        for size in (40, 80, 200):
            yield Case((text, size), verify=_verify_split(text, size))


# -- chapter 1 on the real corpus

@exercise("corpus_chunk_count",
          "window_count for each article's token count, added up over the corpus")
def _():
    counts = list(_hc_tokens().values())
    for size, overlap in ((256, 32), (128, 13), (512, 0), (1000, 100)):
        yield Case((counts, size, overlap),
                   sum(_chunking.window_count(t, size, overlap) for t in counts))


def _longest_article():
    tokens = _hc_tokens()
    longest = max(tokens, key=lambda d: (tokens[d], d))
    return _datasets.load_helpcentre().doc(longest)


@exercise("predict_article_chunks",
          "the stride is 128 - 13 = 115 tokens: one window for the first 128 tokens, then one "
          "per further 115 (rounded up)")
def _():
    actual = len(_chunking.sliding_window_chunks(_longest_article(), 128, 13))
    yield Case((), verify=_predicted(actual, lambda p: abs(p - actual) <= 1,
                                     "a prediction within 1 passes"))


# ---------------------------------------------------------------------------------------
# Chapter 2: similarity
from . import similarity as _sim  # noqa: E402

_rng = np.random.default_rng(7)
_VECS = [(np.array([3.0, 4.0]), np.array([4.0, 3.0])), (np.array([1.0, 0.0]), np.array([0.0, 2.0])),
         (np.array([1.0, 2.0, 3.0]), np.array([-1.0, -2.0, -3.0]))] + \
        [(_rng.normal(size=16), _rng.normal(size=16)) for _ in range(3)]


def _divide_quietly(a, by):
    """``a / by`` as numpy does it, nan for 0 / 0, without the warning."""
    with np.errstate(all="ignore"):
        return np.asarray(a, dtype=np.float64) / by


_RAW_DOT = "the raw dot product, not normalised"


@exercise("cosine", "dot product divided by the product of the two lengths (np.linalg.norm)",
          mistakes=(Mistake(_RAW_DOT, "divide the dot product by np.linalg.norm(a) * "
                            "np.linalg.norm(b)", lambda a, b: float(np.dot(a, b))),))
def _():
    for a, b in _VECS:
        yield Case((a, b), _sim.cosine(a, b))


@exercise("normalise", "divide the vector by its length; leave an all-zero vector as it is",
          mistakes=(Mistake("a division by the squared length", "the length is the square "
                            "root of a @ a: np.linalg.norm(a)",
                            lambda a: _divide_quietly(a, np.dot(a, a))),
                    Mistake("the zero vector divided by 0", "a vector of length 0 has no "
                            "direction: return it unchanged when np.linalg.norm(a) == 0",
                            lambda a: _divide_quietly(a, np.linalg.norm(a)))))
def _():
    for a, _b in _VECS + [(np.zeros(3), None)]:
        yield Case((a,), _sim.normalise(a))


@exercise("distance_from_cosine",
          "for unit vectors |a - b|^2 = 2 - 2 cos(a, b); take the square root",
          mistakes=(Mistake("the squared distance", "2 - 2 cos is |a - b| squared: take its "
                            "square root", lambda c: 2 - 2 * c),))
def _():
    for c in (0.9, 0.5, 1.0, 0.0, -1.0, 0.25):
        yield Case((c,), _sim.distance_from_cosine(c))


@exercise("top_k_by_inner_product",
          "once every vector has length 1 the inner product is the cosine; then you need the "
          "positions of the k largest scores, best first",
          mistakes=(Mistake(_RAW_DOT, "divide each row of docs by its length before the "
                            "product, or a long vector wins whatever it points at",
                            lambda q, docs, k: [int(i) for i in np.argsort(-(docs @ q))[:k]]),
                    Mistake("the k lowest scores", "np.argsort sorts from low to high: sort "
                            "-scores, or reverse the order", lambda q, docs, k:
                            [int(i) for i in np.argsort(_sim.cosine(q, docs)[0])[:k]])))
def _():
    for seed, k in ((0, 3), (1, 5), (2, 1)):
        r = np.random.default_rng(seed)
        q, docs = r.normal(size=8) * 3, r.normal(size=(20, 8)) * r.uniform(0.1, 5, size=(20, 1))
        expected = _sim.top_k(_sim.cosine(q, docs)[0], k)
        yield Case((q, docs, k), verify=lambda got, e=expected: None if [int(i) for i in got] == e
                   else f"expected: {e}\n  got:      {_show(list(got))}")


# -- chapter 2 on the real corpus

def _hc_terms(doc_id: str) -> list[str]:
    return _bm25.Tokenizer()(_datasets.load_helpcentre().doc(doc_id).text)


def _term_cosine(a: list[str], b: list[str]) -> float:
    from collections import Counter

    vocab = sorted(set(a) | set(b))
    ca, cb = Counter(a), Counter(b)
    return float(_sim.cosine(np.array([ca[t] for t in vocab], dtype=float),
                             np.array([cb[t] for t in vocab], dtype=float)))


_COSINE_PAIRS = (("api-rate-limits", "security-sso-setup"),
                 ("billing-refund-policy", "billing-refund-policy"),
                 ("api-rate-limits", "api-rate-limits-2024"),
                 ("security-sso-setup", "security-sso-setup-legacy"))


@exercise("term_cosine",
          "one axis per distinct word of the two lists; each text's vector counts its words; "
          "then the cosine of the two vectors")
def _():
    for a, b in _COSINE_PAIRS:
        ta, tb = _hc_terms(a), _hc_terms(b)
        yield Case((ta, tb), _term_cosine(ta, tb))


@exercise("predict_term_cosine",
          "the retired page and its replacement describe the same policy in mostly the same "
          "words, with a few figures changed")
def _():
    actual = _term_cosine(_hc_terms("billing-refund-policy"),
                          _hc_terms("billing-refund-policy-2024"))
    yield Case((), verify=_predicted(actual, lambda p: abs(p - actual) <= 0.15,
                                     "a prediction within 0.15 passes"))


# ---------------------------------------------------------------------------------------
# Chapter 3: dense retrieval
from . import dense as _dense  # noqa: E402
from . import evaluate as _ev  # noqa: E402


def _retrieval_case(seed: int, n: int = 40, dim: int = 8):
    r = np.random.default_rng(seed)
    m = _sim.normalise(r.normal(size=(n, dim)))
    q = _sim.normalise(r.normal(size=dim))
    meta = [{"department": ["billing", "technical", "security"][i % 3],
             "status": "superseded" if i % 7 == 0 else "current"} for i in range(n)]
    return q, m, meta


@exercise("top_k", "score every row against the query with one matrix product, then take the "
                   "positions of the k highest scores, best first",
          mistakes=(Mistake("the k lowest scores", "np.argsort sorts from low to high: sort "
                            "-scores, or reverse the order",
                            lambda q, m, k: [int(i) for i in np.argsort(m @ q)[:k]]),))
def _():
    for seed, k in ((0, 1), (1, 5), (2, 40)):
        q, m, _ = _retrieval_case(seed)
        yield Case((q, m, k), _dense.top_k_rows(q, m, k))


@exercise("filtered_top_k",
          "keep only the rows whose metadata has every key/value of `where`, rank just those, "
          "and return their original row positions",
          mistakes=(Mistake("positions among the kept rows", "return each row's position in "
                            "the whole matrix: keep the list of kept row numbers and map back",
                            lambda q, m, meta, where, k: _dense.top_k_rows(
                                q, np.asarray(m)[[i for i, md in enumerate(meta) if all(
                                    md.get(key) == v for key, v in where.items())]], k)),))
def _():
    for seed, where, k in ((3, {"department": "security"}, 5), (4, {"status": "superseded"}, 10),
                           (5, {"department": "billing", "status": "current"}, 3),
                           (6, {"department": "legal"}, 5)):
        q, m, meta = _retrieval_case(seed)
        yield Case((q, m, meta, where, k), _dense.top_k_rows(q, m, k, meta, where))


@exercise("postfilter",
          "first take the k * overfetch best rows of the whole matrix, then drop the ones "
          "that fail the filter, then keep at most k — and see how few can be left",
          mistakes=(Mistake("filtering before ranking", "a post-filter ranks the whole matrix, "
                            "takes the k * overfetch best, and only then filters",
                            lambda q, m, meta, where, k, over:
                            _dense.top_k_rows(q, m, k, meta, where)),
                    Mistake("no overfetch", "fetch k * overfetch rows before filtering",
                            lambda q, m, meta, where, k, over:
                            _dense.postfilter_rows(q, m, meta, where, k, 1))))
def _():
    for seed, where, k, over in ((7, {"status": "superseded"}, 5, 1),
                                 (8, {"status": "superseded"}, 5, 4),
                                 (9, {"department": "technical"}, 4, 2)):
        q, m, meta = _retrieval_case(seed)
        yield Case((q, m, meta, where, k, over), _dense.postfilter_rows(q, m, meta, where, k, over))


@exercise("context_tokens",
          "the reader is handed the first k chunks of the ranking; add up their token counts "
          "(fewer if the ranking is shorter than k)")
def _():
    for counts, k in (([120, 80, 200, 40], 2), ([120, 80, 200, 40], 10), ([256] * 50, 20), ([], 5)):
        yield Case((counts, k), _cost.context_tokens(counts, k))


# -- chapter 3 on the real corpus

def _hc_metadata() -> dict:
    return {d.id: dict(d.metadata) for d in _datasets.load_helpcentre().documents}


@exercise("postfilter_survivors",
          "take the first k * overfetch ids of the ranking, keep those whose metadata has every "
          "key/value of `where`, then keep at most k")
def _():
    meta = _hc_metadata()
    for q in _hc_questions(3):
        ranked = _hc_ranking(q.text, 20)
        for where, k, over in (({"department": meta[q.gold[0]]["department"]}, 5, 1),
                               ({"status": "current"}, 3, 2),
                               ({"department": "security", "status": "current"}, 5, 4)):
            yield Case((ranked, meta, where, k, over),
                       [d for d in ranked[:k * over] if _retrieval.matches(meta[d], where)][:k])


def _survivors_of_security_filter() -> int:
    q = _hc_questions(1)[0]
    meta = _hc_metadata()
    return sum(_retrieval.matches(meta[d], {"department": "security"})
               for d in _hc_ranking(q.text, 5))


@exercise("predict_postfilter_survivors",
          "a billing question's top 5 is mostly billing pages; a security filter applied after "
          "the search keeps only the security pages among those 5")
def _():
    actual = _survivors_of_security_filter()
    yield Case((), verify=_predicted(actual, lambda p: abs(p - actual) <= 1,
                                     "a prediction within 1 passes"))


# ---------------------------------------------------------------------------------------
# Chapter 4: measuring retrieval
# The first relevant document sits at rank 1, 3, none, 1, none, 2, 4: with k = 1, 2, 3 some
# ranking has it exactly at rank k and another at k + 1, so a k off by one fails a case.
# "b" graded 0 is not relevant; nothing relevant at all gives 0.0.
_RANKED = [["a", "b", "c", "d", "e"], ["x", "y", "a", "b"], ["x", "y", "z"], ["b", "x", "a"], [],
           ["x", "g", "y", "z"], ["x", "y", "z", "g", "h"], ["b", "a"], ["a", "b"]]
_RELEVANT = [{"a": 1}, {"a": 1, "b": 1}, {"q": 1}, {"a": 1, "b": 1, "c": 1}, {"a": 1},
             {"g": 1}, {"g": 1, "h": 1}, {"b": 0, "a": 1}, {}]


def _shorter_k(metric):
    """The k off by one: ``ranked[:k-1]``, one result fewer than asked for."""
    return lambda relevant, ranked, k: metric(relevant, ranked[:k - 1], k)


def _ignoring_k(metric):
    """No cut at k: the whole ranking counts."""
    return lambda relevant, ranked, k: metric(relevant, ranked, max(len(ranked), len(relevant), 1))


def _recall_over_k(relevant, ranked, k):
    """Wrong: divides by k, not by the number of relevant documents."""
    return len({d for d, r in relevant.items() if r > 0}.intersection(ranked[:k])) / k


def _rr_from_0(relevant, ranked, k):
    """Wrong: ranks counted from 0, so the top result divides by zero."""
    for rank, d in enumerate(ranked[:k]):
        if relevant.get(d, 0) > 0:
            return 1.0 / rank
    return 0.0


def _mean_of(rr):
    """MRR built on a given reciprocal rank function."""
    return lambda rels, rankeds, k: (sum(rr(r, d, k) for r, d in zip(rels, rankeds, strict=True))
                                     / len(rels))


def _mrr_over_found(rels, rankeds, k):
    """Wrong: averages over the questions whose answer was found, not over all of them."""
    rrs = [_ev.reciprocal_rank(r, d, k) for r, d in zip(rels, rankeds, strict=True)]
    found = [x for x in rrs if x > 0]
    return sum(found) / len(found) if found else 0.0


def _ndcg_with(discount, cut_ideal=True):
    """nDCG with another discount, or with the ideal ordering not cut at k."""
    def ndcg(relevant, ranked, k):
        dcg = lambda gains: sum(g / discount(r) for r, g in enumerate(gains, 1))  # noqa: E731
        ideal = sorted((r for r in relevant.values() if r > 0), reverse=True)
        best = dcg(ideal[:k] if cut_ideal else ideal)
        return dcg([relevant.get(d, 0) for d in ranked[:k]]) / best if best > 0 else 0.0
    return ndcg


_K_SHORT = ("a k off by one (ranked[:k-1])", "the first k results are ranked[:k]: rank k is "
            "included and rank k + 1 is not")
_K_IGNORED = ("no cut at k", "only the first k results count: slice with ranked[:k]")
_RECALL_MISTAKES = (Mistake(*_K_SHORT, _shorter_k(_ev.recall_at_k)),
                    Mistake(*_K_IGNORED, _ignoring_k(_ev.recall_at_k)),
                    Mistake("recall divided by k", "recall divides by the number of relevant "
                            "documents, not by k (that would be precision)", _recall_over_k))
_RR_MISTAKES = (Mistake(*_K_SHORT, _shorter_k(_ev.reciprocal_rank)),
                Mistake(*_K_IGNORED, _ignoring_k(_ev.reciprocal_rank)),
                Mistake("ranks counted from 0", "enumerate(..., 1): the top result has rank 1, "
                        "so its reciprocal rank is 1.0", _rr_from_0))


@exercise("recall_at_k",
          "of the relevant documents, what share appears in the first k of the ranking?",
          mistakes=_RECALL_MISTAKES)
def _():
    for rel, ranked in zip(_RELEVANT, _RANKED, strict=True):
        for k in (1, 2, 3, 5):
            yield Case((rel, ranked, k), _ev.recall_at_k(rel, ranked, k))


@exercise("hit_at_k", "1.0 if at least one relevant document is in the first k, else 0.0",
          mistakes=(Mistake(*_K_SHORT, _shorter_k(_ev.hit_at_k)),
                    Mistake(*_K_IGNORED, _ignoring_k(_ev.hit_at_k)),
                    Mistake("grade 0 counted as relevant", "a document is relevant only when "
                            "its grade is above 0",
                            lambda rel, ranked, k: float(any(d in rel for d in ranked[:k])))))
def _():
    for rel, ranked in zip(_RELEVANT, _RANKED, strict=True):
        for k in (1, 2, 3, 5):
            yield Case((rel, ranked, k), _ev.hit_at_k(rel, ranked, k))


@exercise("reciprocal_rank", "walk down the first k results; at the first relevant one return "
                             "1 / its rank (ranks count from 1); none found -> 0.0",
          mistakes=_RR_MISTAKES)
def _():
    for rel, ranked in zip(_RELEVANT, _RANKED, strict=True):
        for k in (1, 2, 3, 10):
            yield Case((rel, ranked, k), _ev.reciprocal_rank(rel, ranked, k))


@exercise("mean_reciprocal_rank",
          "the mean over queries of the reciprocal rank; the chapter's worked example "
          "(first correct at ranks 1, 3, 2, not found, 1) gives 0.567",
          mistakes=tuple(Mistake(m.name, m.advice + " (in reciprocal_rank, which MRR calls)",
                                 _mean_of(m.wrong)) for m in _RR_MISTAKES) +
          (Mistake("the mean over the questions answered", "divide by the number of questions: "
                   "one whose answer is not found counts as 0", _mrr_over_found),))
def _():
    worked = [["g", "a"], ["a", "b", "g"], ["a", "g"], ["a", "b", "c"], ["g"]]
    for k in (10, 1, 2, 3):
        yield Case(([{"g": 1}] * 5, worked, k), _ev.mean_reciprocal_rank([{"g": 1}] * 5, worked, k))
    for k in (10, 1, 2, 3):
        yield Case((_RELEVANT, _RANKED, k), _ev.mean_reciprocal_rank(_RELEVANT, _RANKED, k))


@exercise("ndcg_at_k",
          "DCG sums relevance / log2(rank + 1) over the first k; divide by the DCG of the best "
          "possible ordering of the relevant documents",
          mistakes=(Mistake(*_K_SHORT, _shorter_k(_ev.ndcg_at_k)),
                    Mistake(*_K_SHORT, lambda rel, ranked, k: _ev.ndcg_at_k(rel, ranked, k - 1)),
                    Mistake(*_K_IGNORED, _ignoring_k(_ev.ndcg_at_k)),
                    Mistake("a discount of log2(rank)", "the discount is log2(rank + 1) with "
                            "ranks from 1 (log2(i + 2) with i from 0), so rank 1 counts in full",
                            _ndcg_with(math.log2)),
                    Mistake("an ideal DCG not cut at k", "the ideal ordering is cut to its "
                            "first k grades too", _ndcg_with(lambda r: math.log2(r + 1), False))))
def _():
    graded = [{"a": 3, "b": 1}, {"c": 2, "a": 1}]
    extra = [(graded[0], ["b", "x", "a"]), (graded[1], ["a", "c"]), (graded[1], ["x", "c", "a"])]
    for rel, ranked in list(zip(_RELEVANT, _RANKED, strict=True)) + extra:
        for k in (1, 2, 3, 10):
            yield Case((rel, ranked, k), _ev.ndcg_at_k(rel, ranked, k))


# -- chapter 4 on the real corpus

def _hc_dev_run(k: int = 10):
    """(qrels list, rankings) of BM25 on the help centre's answerable dev questions."""
    qs = [q for q in _datasets.load_helpcentre().split("dev") if q.gold]
    return [{d: 1 for d in q.gold} for q in qs], [_hc_ranking(q.text, k) for q in qs]


def _mean_recall(relevant, rankings, k) -> float:
    qrels = {str(i): rel for i, rel in enumerate(relevant)}
    run = {str(i): {d: float(len(r) - n) for n, d in enumerate(r)} for i, r in enumerate(rankings)}
    return _ev.evaluate(qrels, run, f"recall@{k}")


@exercise("mean_recall",
          "recall@k of each question (its relevant documents found in the first k, as a share), "
          "then the mean over the questions")
def _():
    relevant, rankings = _hc_dev_run()
    for k in (1, 5, 10):
        yield Case((relevant, rankings, k), _mean_recall(relevant, rankings, k))
    yield Case((relevant[:5], rankings[:5], 3), _mean_recall(relevant[:5], rankings[:5], 3))


@exercise("predict_bm25_recall",
          "the dev split mixes easy exact-token questions with paraphrases and look-alike pages; "
          "BM25 only matches words")
def _():
    actual = _mean_recall(*_hc_dev_run(), 5)
    yield Case((), verify=_predicted(actual, lambda p: abs(p - actual) <= 0.15,
                                     "a prediction within 0.15 passes"))


# ---------------------------------------------------------------------------------------
# Chapter 5: keyword search, hybrid retrieval and RRF
from . import fusion as _fusion  # noqa: E402
from .types import Hit as _Hit  # noqa: E402


@exercise("bm25_idf", "Lucene's IDF: the log of 1 + (N - n + 0.5) / (n + 0.5); it stays above zero "
                      "even for a term in every document",
          mistakes=(Mistake("the classic IDF without the 1 +", "Lucene adds 1 inside the "
                            "log, so a term in most documents does not score below zero",
                            lambda n_docs, df: math.log((n_docs - df + 0.5) / (df + 0.5))),))
def _():
    for n_docs, df in ((1000, 1), (1000, 10), (1000, 500), (1000, 1000), (3, 2), (10_370, 4_321)):
        yield Case((n_docs, df), _bm25.idf_lucene(n_docs, df))


@exercise("bm25_term_score",
          "idf times a saturating tf: tf / (tf + k1 * (1 - b + b * doc_len / avgdl)); b decides "
          "how much longer-than-average documents are penalised",
          mistakes=(Mistake("the (k1 + 1) factor", "Lucene's BM25, the one this workbook "
                            "uses, drops the constant (k1 + 1) from the numerator",
                            lambda tf, dl, avgdl, idf, k1, b:
                            _bm25.term_weight(tf, dl, avgdl, idf, k1, b) * (k1 + 1)),
                    Mistake("doc_len / avgdl upside down", "a longer-than-average document "
                            "is penalised: b * doc_len / avgdl", lambda tf, dl, avgdl, idf, k1, b:
                            _bm25.term_weight(tf, avgdl, dl, idf, k1, b))))
def _():
    for args in ((1, 100, 100, 2.0, 1.2, 0.75), (5, 100, 100, 2.0, 1.2, 0.75),
                 (3, 400, 100, 1.5, 1.2, 0.75), (3, 400, 100, 1.5, 1.2, 0.0),
                 (2, 50, 120, 0.7, 2.0, 1.0), (0, 80, 100, 3.0, 1.2, 0.75)):
        yield Case(args, _bm25.term_weight(*args))


def _rrf_ids(rankings, k):
    hits = [[_Hit(d, 0.0, r) for r, d in enumerate(rank, 1)] for rank in rankings]
    return [(h.id, h.score) for h in _fusion.reciprocal_rank_fusion(hits, rrf_k=k)]


def _rrf_variant(first_rank: int, ties_by_id: bool):
    """RRF with ranks counted from ``first_rank``, ties broken by id or left as first seen."""
    def rrf(rankings, k):
        totals = {}
        for ranking in rankings:
            for rank, doc in enumerate(ranking, first_rank):
                totals[doc] = totals.get(doc, 0.0) + 1.0 / (k + rank)
        return sorted(totals.items(), key=lambda t: (-t[1], t[0]) if ties_by_id else -t[1])
    return rrf


@exercise("rrf", "each list adds 1 / (k + rank) to a document it contains, ranks counting from 1; "
                 "sort by the total, highest first, ties by id",
          mistakes=(Mistake("ranks counted from 0", "enumerate(ranking, 1): the top document "
                            "adds 1 / (k + 1)", _rrf_variant(0, True)),
                    Mistake("ties left in the order first seen", "sort with a key of "
                            "(-total, id), so equal totals come out by id",
                            _rrf_variant(1, False))))
def _():
    for rankings, k in (([["a", "b", "c"], ["b", "a"]], 60), ([["a", "b", "c"], ["c", "d"]], 60),
                        ([["x"], [], ["y", "x"]], 60), ([["a", "b"], ["b", "a"]], 0),
                        ([["p", "q", "r"]], 1), ([["b", "a"], ["a", "b"]], 60)):
        yield Case((rankings, k), _rrf_ids(rankings, k))


@exercise("rescued_documents",
          "a rescued document is in the fused top n, not in the dense top n, and was found by the "
          "keyword list; keep the fused order")
def _():
    dense = ["d1", "d2", "d3", "d4", "d5", "d6"]
    keyword = ["k1", "d3", "k2", "d9", "d1"]
    fused = ["d3", "d1", "k1", "d2", "k2", "d4", "d9"]
    for n in (1, 3, 5, 7):
        yield Case((dense, keyword, fused, n), _fusion.rescued(dense, keyword, fused, n))


@exercise("minmax_normalise", "map the smallest score to 0 and the largest to 1; if all scores are "
                              "equal, give every one 1.0; an empty list stays empty",
          mistakes=(Mistake("no special case for equal scores", "when the highest equals the "
                            "lowest, hi - lo is 0: give every score 1.0 instead of dividing",
                            lambda s: [(x - min(s)) / (max(s) - min(s)) for x in s]),
                    Mistake("no special case for equal scores", "when the highest equals the "
                            "lowest, hi - lo is 0: give every score 1.0 instead of dividing",
                            lambda s: list(_divide_quietly(np.subtract(s, min(s)),
                                                           max(s) - min(s)))),
                    Mistake("equal scores given 0.0", "when all scores are equal every one is "
                            "the best: 1.0", lambda s: [0.0] * len(s) if max(s) == min(s)
                            else _fusion.minmax_normalise(s))))
def _():
    for scores in ([3.0, 1.0, 2.0], [12.5, 7.25, 0.5, 9.0], [0.42], [2.0, 2.0], [-1.0, 0.0, 1.0],
                   []):  # a channel that found nothing: nothing to scale
        yield Case((scores,), _fusion.minmax_normalise(scores))


# -- chapter 5 on the real corpus

def _hc_doc_terms() -> list[list[str]]:
    """Every help-centre article as the BM25 index tokenizes it."""
    tok = _hc_bm25().tokenizer
    return [tok(d.text) for d in _datasets.load_helpcentre().documents]


def _idf_from_index(term: str) -> float:
    idx = _hc_bm25()
    if term in idx.vocab_:
        return float(idx.idf_[idx.vocab_[term]])
    return _bm25.idf_lucene(len(idx), 0)


@exercise("corpus_idf",
          "n = the number of documents whose token list contains the term (once per document); "
          "then Lucene's IDF: log(1 + (N - n + 0.5) / (n + 0.5))")
def _():
    docs = _hc_doc_terms()
    for term in ("refund", "plan", "saml", "invoice", "zebra"):
        yield Case((docs, term), _idf_from_index(term))


@exercise("predict_plan_df",
          "this is a SaaS help centre: plans (Free, Starter, Pro, Enterprise) come up on "
          "billing, account and feature pages alike")
def _():
    actual = sum("plan" in set(t) for t in _hc_doc_terms())
    yield Case((), verify=_predicted(actual, lambda p: abs(p - actual) <= 0.25 * actual,
                                     "a prediction within 25% passes"))


# ---------------------------------------------------------------------------------------
# Chapter 6: reranking
from . import rerank as _rerank  # noqa: E402


@exercise("thresholded_rerank",
          "order the candidates by the reranker's score (ties: original order), keep those at or "
          "above the threshold, and at most k of them — an empty list is a valid answer",
          mistakes=(Mistake("a strict threshold (>)", "a score equal to the threshold is kept: "
                            ">=", lambda ids, scores, k, th: [ids[i] for i in
                                                 _rerank.rerank_positions(
                                                     scores, k, math.nextafter(th, math.inf))]),))
def _():
    ids = ["c1", "c2", "c3", "c4", "c5"]
    scores = [0.20, 0.91, 0.35, 0.91, 0.05]
    for k, th in ((3, 0.0), (3, 0.3), (2, 0.9), (5, 0.95), (1, 0.3), (5, 0.35)):
        yield Case((ids, scores, k, th), [ids[i] for i in _rerank.rerank_positions(scores, k, th)])


@exercise("word_windows",
          "windows of `size` words starting every `stride` words, as (first word, end word) "
          "index pairs; the last window must reach the last word; a short text is one window")
def _():
    for n, size, stride in ((250, 100, 50), (100, 100, 50), (30, 100, 50), (11, 4, 3), (10, 5, 5)):
        yield Case((n, size, stride), _rerank.word_window_spans(n, size, overlap=size - stride))


@exercise("max_window_score", "a passage is as relevant as its best window: the max of its window "
                              "scores, one number per passage",
          mistakes=(Mistake("the mean of the windows", "one good window is enough: take the "
                            "max, not the mean", lambda s: [sum(w) / len(w) for w in s]),))
def _():
    for scores in ([[0.1, 0.7, 0.3]], [[0.2], [0.5, 0.4], [0.9, 0.1, 0.1, 0.2]], [[-0.2, -0.1]]):
        yield Case((scores,), _rerank.max_window_scores(scores))


@exercise("candidates_for_budget",
          "how many (query, passage) pairs fit in the latency budget? whole candidates only "
          "(round down), never more than are available",
          mistakes=(Mistake("no cap at the number available", "you cannot rerank more than "
                            "retrieval returned: min(..., available)",
                            lambda ms, budget, available: int(budget // ms)),
                    Mistake("rounding to the nearest", "a pair that does not fully fit is over "
                            "budget: round down (//)", lambda ms, budget, available:
                            min(available, round(budget / ms)))))
def _():
    for ms_per_pair, budget, available in ((2.0, 100.0, 50), (2.0, 100.0, 30), (3.0, 100.0, 80),
                                           (7.5, 5.0, 50), (1.0, 250.0, 100)):
        yield Case((ms_per_pair, budget, available),
                   _rerank.candidates_within_budget(ms_per_pair, budget, available))


# -- chapter 6 on the real corpus

def _by_words(rank: int = 0):
    """The help-centre article with the ``rank``-th most words (0 = the longest)."""
    docs = sorted(_datasets.load_helpcentre().documents,
                  key=lambda d: (-len(d.text.split()), d.id))
    return docs[rank]


@exercise("passage_windows",
          "find each word's character span (re.finditer(r'\\S+', text)); window i runs from the "
          "start of its first word to the end of its last; a text of at most `size` words is "
          "one window, text.strip()")
def _():
    for rank in (0, 40, 120):
        text = _by_words(rank).text
        for size, stride in ((100, 50), (60, 60), (500, 250)):
            yield Case((text, size, stride), _rerank.windows(text, size, size - stride))


@exercise("predict_window_count",
          "windows of 100 words starting every 50: about one window per 50 words of the page")
def _():
    actual = len(_rerank.windows(_by_words(0).text, 100, 50))
    yield Case((), verify=_predicted(actual, lambda p: abs(p - actual) <= 1,
                                     "a prediction within 1 passes"))


# ---------------------------------------------------------------------------------------
# Chapter 7: the extractive reader
from . import readers as _readers  # noqa: E402


def _logit_cases():
    r = np.random.default_rng(11)
    for n, cap in ((6, 30), (12, 3), (20, 5), (8, 1)):
        start, end = r.normal(size=n), r.normal(size=n)
        allowed = np.ones(n, dtype=bool)
        allowed[:3] = False                       # the question and [CLS]
        allowed[-1] = False                       # the final [SEP]
        yield start, end, allowed, cap


@exercise("best_span",
          "mask the disallowed tokens before the softmax, then score every (start, end) pair with "
          "end >= start and at most max_answer_tokens tokens by p(start) * p(end); return the best "
          "(start, end, score)")
def _():
    for start, end, allowed, cap in _logit_cases():
        i, j, s = _readers.best_span(start, end, allowed, cap)
        yield Case((start, end, allowed, cap), (i, j, s))


@exercise("span_to_characters",
          "token i covers characters offsets[i][0] to offsets[i][1] of the context; the span runs "
          "from the first token's start to the last token's end",
          mistakes=(Mistake("the span cut at the last token's start", "the span ends where "
                            "its last token ends: offsets[end][1]", lambda ctx, offsets, i, j:
                            (ctx[offsets[i][0]:offsets[j][0]], offsets[i][0], offsets[j][0])),))
def _():
    context = ("Enterprise annual contracts carry a 14-day refund window measured from the "
               "invoice date.")
    offsets = [(0, 10), (11, 17), (18, 27), (28, 33), (34, 35), (36, 38), (38, 39), (39, 42),
               (43, 49), (50, 56)]
    for i, j in ((5, 7), (0, 0), (5, 9), (8, 9)):
        yield Case((context, offsets, i, j), _readers.span_to_characters(context, offsets, i, j))


@exercise("windows_with_stride",
          "windows of at most `size` tokens; each starts `size - stride` tokens after the previous "
          "(so neighbours share `stride` tokens); stop once a window reaches the end",
          mistakes=(Mistake("stride taken as the step", "the tokenizer's stride is how many "
                            "tokens neighbours share; the step is size - stride",
                            lambda n, size, stride:
                            _chunking.sliding_windows(n, size, overlap=size - stride)),))
def _():
    for n, size, stride in ((10, 4, 1), (100, 30, 10), (30, 30, 5), (7, 10, 2), (50, 16, 8)):
        # the tokenizer's `stride` is the tokens neighbours share: a sliding window's overlap
        yield Case((n, size, stride), _chunking.sliding_windows(n, size, overlap=stride))


@exercise("abstain_below",
          "answer only when the best span's score clears the threshold; otherwise return None",
          mistakes=(Mistake("a strict threshold (>)", "a score equal to the threshold answers: "
                            ">=", lambda spans, th: _readers.answer_or_abstain(
                                spans, math.nextafter(th, math.inf))),))
def _():
    spans = [("14-day", 0.62), ("30 days", 0.21), ("invoice date", 0.05)]
    for th in (0.5, 0.7, 0.0, 0.62):
        yield Case((spans, th), _readers.answer_or_abstain(spans, th))
    yield Case(([], 0.1), _readers.answer_or_abstain([], 0.1))
    tied = [("30 days", 0.4), ("14-day", 0.7), ("14 days", 0.7)]   # the first of equals wins
    yield Case((tied, 0.5), _readers.answer_or_abstain(tied, 0.5))


# -- chapter 7 on the real corpus

def _sentence_answers(n: int):
    """(whole sentence around the gold answer, gold answer) for the first ``n`` answerable
    help-centre reader examples: what a sentence reader returns when it is right."""
    import re

    out = []
    for ex in _datasets.load_reader_set("helpcentre", "train"):
        if ex.is_impossible or not ex.answers:
            continue
        text, start = ex.answers[0]
        cuts = [0] + [m.end() for m in re.finditer(r"(?<=[.!?])\s+|\n+", ex.context)]
        a = max(c for c in cuts if c <= start)
        z = min([c for c in cuts if c > start + len(text) - 1] + [len(ex.context)])
        out.append((ex.context[a:z].strip(), text))
        if len(out) == n:
            break
    return out


@exercise("answer_f1",
          "normalise both (lower case, drop punctuation and a/an/the, split on spaces); count "
          "the shared tokens (with repeats); F1 = 2PR/(P+R), 0.0 when nothing is shared")
def _():
    for sentence, gold in _sentence_answers(6):
        yield Case((sentence, gold), _ev.f1_score(sentence, [gold]))
    sentence, gold = _sentence_answers(1)[0]
    yield Case((gold, gold), _ev.f1_score(gold, [gold]))
    yield Case(("", gold), _ev.f1_score("", [gold]))


@exercise("predict_sentence_f1",
          "a whole sentence that contains the answer has perfect recall, but its precision is "
          "the answer's share of the sentence's words")
def _():
    pairs = _sentence_answers(20)
    actual = sum(_ev.f1_score(s, [g]) for s, g in pairs) / len(pairs)
    yield Case((), verify=_predicted(actual, lambda p: abs(p - actual) <= 0.15,
                                     "a prediction within 0.15 passes"))


# ---------------------------------------------------------------------------------------
# Chapter 8: the generative reader

def _passages(n: int) -> list:
    """``n`` retrieved passages, best first, with ids p1..pn."""
    return [_Hit(f"p{i}", 1.0 / i, i) for i in range(1, n + 1)]


@exercise("parse_citations",
          "find every [n] in the reply; valid only when there is at least one and every n is "
          "between 1 and the number of passages")
def _():
    for reply, n in (("14 days [1].", 3), ("14 days [1]. 30 days [3][1].", 3), ("14 days [4].", 3),
                     ("Fourteen days.", 3), ("[2] says 7 days; [1] says 21 [2].", 2),
                     ("14 days [0].", 3)):
        cited = _readers.parse_citations(reply, _passages(n))
        yield Case((reply, n), (list(cited.numbers), cited.valid))


@exercise("reading_order",
          "the strongest passage first, the second-strongest last, the weakest in the middle: "
          "take ranks 1, 3, 5, ... then the even ranks backwards")
def _():
    for n in (1, 2, 3, 5, 6):
        ids = [h.id for h in _passages(n)]
        yield Case((ids,), [h.id for h in _readers.order_for_reading(_passages(n))])


@exercise("is_abstention",
          "the model abstains only when the whole reply is the exact string NOT_IN_CONTEXT "
          "(surrounding spaces and a final full stop allowed)",
          mistakes=(Mistake("a search anywhere in the reply", "only a reply that is exactly "
                            "the marker abstains; a sentence that mentions it does not",
                            lambda reply: "NOT_IN_CONTEXT" in reply),
                    Mistake("a case-insensitive match", "the marker is exact and upper case",
                            lambda reply: reply.strip().rstrip(".").strip().upper()
                            == "NOT_IN_CONTEXT")))
def _():
    for reply in ("NOT_IN_CONTEXT", " NOT_IN_CONTEXT.\n", "not_in_context",
                  "The answer is NOT_IN_CONTEXT",
                  "NOT IN CONTEXT", "14 days [1]"):
        yield Case((reply,), _readers.is_abstention(reply))


@exercise("number_passages",
          "one block per passage, numbered from 1, each giving its source, so the model can cite "
          "[n] and the code can map n back to a source")
def _():
    for texts, sources in ((["Refunds take 5 days."], ["billing-faq"]),
                           (["A.", "B.", "C."], ["s1", "s2", "s3"])):
        yield Case((texts, sources), _readers.number_passages(texts, sources))


# -- chapter 8 on the real corpus

def _cited_cases():
    for q in _hc_questions(3):
        ids = _hc_ranking(q.text, 5)
        first = _datasets.load_helpcentre().doc(ids[0]).text.split("\n\n")[1].strip()
        for reply in (f"{first} [1]", f"{first} [2][1]. See also [1] and [5].",
                      f"{first} [7]", "NOT_IN_CONTEXT"):
            yield reply, ids


@exercise("cited_sources",
          "the numbers in [n] marks, in order; keep those between 1 and the number of passages; "
          "map n to passage_ids[n - 1]; drop repeats, keeping the first")
def _():
    for reply, ids in _cited_cases():
        hits = [_Hit(d, 1.0, r) for r, d in enumerate(ids, 1)]
        yield Case((reply, ids), list(_readers.parse_citations(reply, hits).sources))


def _top3_tokens() -> int:
    q = _hc_questions(2)[1]
    return sum(_hc_tokens()[d] for d in _hc_ranking(q.text, 3))


@exercise("predict_context_tokens",
          "a help-centre article is a few hundred words, and an encoder token is about three "
          "quarters of a word")
def _():
    actual = _top3_tokens()
    yield Case((), verify=_predicted(actual, lambda p: abs(p - actual) <= 0.3 * actual,
                                     "a prediction within 30% passes"))


# ---------------------------------------------------------------------------------------
# Chapter 9: the whole pipeline
from types import SimpleNamespace as _NS  # noqa: E402

from . import pipeline as _pipeline  # noqa: E402


class _SpanReader:
    """An extractive reader as ``Pipeline.decide`` sees it: only its ``min_score`` matters
    once every candidate's best span is known."""

    def __init__(self, min_score=None):
        self.min_score = min_score

    def spans(self, question, context, source=""):  # never called by decide
        raise NotImplementedError


def _prepared(confidence, docs, span_scores):
    """A ``Prepared`` question: one candidate per doc id, the best span of each scored as
    given (sentences without figures, so no conflict can be found)."""
    hits = tuple(_Hit(f"{d}:0-40", 0.0 if confidence is None else confidence, r, doc_id=d,
                      text="Admins can change this in the settings.")
                 for r, d in enumerate(docs, 1))
    spans = tuple(_readers.Span("Admins can change this in the settings.", 0, 39, s, h.id)
                  for h, s in zip(hits, span_scores, strict=True))
    return _pipeline.Prepared("q", "q", hits, confidence, spans, ())


@exercise("escalation_reason",
          "check in the pipeline's order: nothing retrieved -> no_candidates; a min_score is set "
          "and the confidence is below it -> low_confidence; a reader floor is set and "
          "the best span scores below it -> reader_abstained; otherwise None (a score equal to "
          "its threshold passes)",
          mistakes=(Mistake("a threshold that rejects an equal score (<=)", "escalate only "
                            "below the threshold: a score equal to it passes",
                            lambda n, conf, best, th, floor: "no_candidates" if n == 0
                            else "low_confidence" if th is not None and conf <= th
                            else "reader_abstained" if floor is not None and best <= floor
                            else None),))
def _():
    for n, conf, best, th, floor in ((0, None, 0.0, 0.5, None), (0, 0.9, 0.9, None, None),
                                     (3, 0.42, 0.7, 0.45, None), (3, 0.45, 0.7, 0.45, None),
                                     (5, 0.61, 0.30, 0.45, 0.35), (5, 0.61, 0.35, 0.45, 0.35),
                                     (2, 0.30, 0.10, None, None), (2, 0.30, 0.10, None, 0.2),
                                     (4, 0.2, 0.1, 0.5, 0.5)):
        spans = [best] + [best / 2] * (n - 1) if n else []
        p = _pipeline.Pipeline(None, reader=_SpanReader(floor), min_score=th)
        reason = p.decide(_prepared(conf, [f"doc-{i}" for i in range(n)], spans)).reason
        yield Case((n, conf, best, th, floor), reason)


_TRACE = [{"name": "condense", "seconds": 0.0, "ids": [], "scores": [], "detail": {}},
          {"name": "dense", "seconds": 0.01, "ids": ["a:0-9", "g:0-9", "b:0-9"],
           "scores": [0.71, 0.69, 0.52], "detail": {}},
          {"name": "bm25", "seconds": 0.002, "ids": ["c:0-9", "a:0-9"], "scores": [9.1, 7.7],
           "detail": {}},
          {"name": "fuse", "seconds": 0.0003, "ids": ["a:0-9", "c:0-9", "g:0-9", "b:0-9"],
           "scores": [0.032, 0.016, 0.016, 0.016], "detail": {}},
          {"name": "read", "seconds": 0.2, "ids": ["a:0-9", "c:0-9"], "scores": [0.8, 0.5],
           "detail": {}},
          {"name": "decide", "seconds": 0.0, "ids": ["a:0-9"], "scores": [0.8], "detail": {}}]


@exercise("gold_ranks",
          "skip the condense stage; for every other stage find the position (from 1) of the "
          "first of its ids that is a gold id, or None when it passed on no gold id",
          mistakes=(Mistake("ranks counted from 0", "enumerate(ids, 1): the first id has rank 1",
                            lambda trace, gold: {s: r if r is None else r - 1 for s, r in
                                                 _pipeline.gold_ranks(trace, gold).items()}),))
def _():
    for gold in ({"g:0-9"}, {"a:0-9"}, {"c:0-9", "g:0-9"}, {"z:0-9"}, set()):
        yield Case((_TRACE, gold), _pipeline.gold_ranks(_TRACE, gold))
    escalated = _TRACE[:5] + [{"name": "decide", "seconds": 0.0, "ids": [], "scores": [],
                               "detail": {"escalated": "low_confidence"}}]
    yield Case((escalated, {"a:0-9"}), _pipeline.gold_ranks(escalated, {"a:0-9"}))


@exercise("best_threshold",
          "try no threshold first, then every distinct confidence from the lowest up; a "
          "threshold answers the questions whose confidence is at least it; keep the first "
          "that maximises right - wrong_cost * wrong")
def _():
    sets = (([0.9, 0.8, 0.7, 0.6, 0.5], [True, True, False, True, False], 2.0),
            ([0.9, 0.8, 0.7], [True, True, True], 2.0),
            ([0.9, 0.8, 0.7], [False, False, False], 2.0),
            ([0.4, 0.6, 0.6, 0.5, 0.8, 0.3], [False, True, False, True, True, False], 1.0),
            ([0.4, 0.6, 0.6, 0.5, 0.8, 0.3], [False, True, False, True, True, False], 3.0),
            ([0.55, 0.75], [False, True], 0.5))
    for confidences, right, cost in sets:
        prepared = [_prepared(c, ["gold" if ok else "other"], [0.9])
                    for c, ok in zip(confidences, right, strict=True)]
        questions = [_NS(gold=("gold",)) for _ in confidences]
        expected = _pipeline.Pipeline(None, reader=_SpanReader()).calibrate(
            prepared, questions, wrong_cost=cost)
        yield Case((confidences, right, cost), expected)


_CSV_PRO = [{"role": "user", "content": "can I export our tickets to csv on pro?"},
            {"role": "assistant", "content": "Yes. On Pro, CSV export has unlimited rows."}]


@exercise("condense_follow_up",
          "no earlier user turn, or not a follow-up -> the question unchanged; otherwise the last "
          "user turn (every plan in it swapped for the first plan the new message names, lower "
          "case), a space, then the new message; mind word boundaries ('it' is not in 'limit')")
def _():
    cases = [("and on the free plan?", _CSV_PRO), ("and on the free plan?", None),
             ("and on the free plan?", []),
             ("How do I reset the password of an agent who left the company last week?", _CSV_PRO),
             ("what about Enterprise, is there anything extra we should know before we sign?",
              _CSV_PRO),
             ("we looked at the export limits page but could not find where it is configured",
              _CSV_PRO),
             ("Is there a limit on the number of rows in a single export on the Starter plan?",
              _CSV_PRO),
             ("and starter?", [{"role": "user", "content": "Pro or Team: which plan has SSO on "
                                                           "the pro tier?"}]),
             ("does that apply to attachments too?",
              [{"role": "user", "content": "how long do you keep tickets"},
               {"role": "assistant", "content": "90 days on Free."},
               {"role": "user", "content": "   "}]),
             ("Okay, can admins do it?", [{"role": "assistant", "content": "Hello!"}])]
    for question, history in cases:
        yield Case((question, history), _pipeline.RuleCondenser().condense(question, history))


@exercise("extract_quantities",
          "a number (digits, maybe with , or . inside) then, after optional spaces and one "
          "optional hyphen, a unit from the table not followed by another letter; drop the "
          "commas, normalise the unit; return a set of (value, unit)")
def _():
    for text in ("Free keeps 90 days of history; exports hold 10,000 rows.",
                 "Enterprise annual contracts carry a 14-day refund window.",
                 "Uptime is 99.9% and we answer within 4 hours, or 240 Minutes.",
                 "Version 3.11 added nothing measured in days.",
                 "Pro allows 1,200 requests per minute and 50 GB of attachments.",
                 "A 30 - day trial, 2 agents, 1 year, 7 dayshift workers.",
                 "No figures here at all."):
        yield Case((text,), _pipeline.quantities(text))


_RETENTION = [("On the Free plan, 90 days of ticket history are kept.", 0.81),
              ("On the Free plan, tickets older than 30 days are deleted.", 0.80),
              ("On the Free plan, ticket history lasts 90 days.", 0.79),
              ("We email the owner 3 days before the trial ends.", 0.80),
              ("On the Free plan, tickets older than 30 days are deleted.", 0.70),
              ("Free plan tickets are kept for a while.", 0.80),
              ("Starter keeps 1 year of ticket history.", 0.84)]


@exercise("first_conflict",
          "an answer without figures has no conflict; go through the others in order, skip one "
          "scoring more than `margin` below the answer or sharing fewer than `min_shared` topic "
          "words with it; the first that states a figure in one of the answer's units, and none "
          "of the answer's (value, unit) pairs in those units, is the conflict")
def _():
    span = lambda t: _readers.Span(t[0], 0, len(t[0]), t[1])  # noqa: E731
    r = _RETENTION
    for answer, others, margin in ((r[0], [r[1]], 0.05), (r[0], [r[2], r[3], r[4]], 0.05),
                                   (r[0], [r[4]], 0.2), (r[0], [r[5], r[1]], 0.05),
                                   (r[5], [r[1]], 0.05), (r[6], [r[0], r[1]], 0.05),
                                   (r[3], [r[1]], 0.05)):
        found = _pipeline.find_conflict(span(answer), [span(o) for o in others], margin)
        yield Case((answer, others, margin), None if found is None else found.text)


# -- chapter 9 on the real corpus

def _figure_articles() -> list[str]:
    docs = sorted(_datasets.load_helpcentre().documents,
                  key=lambda d: (-len(_pipeline.quantities(d.text)), d.id))
    return [d.text for d in docs[:3]] + [_datasets.load_helpcentre().doc("api-rate-limits").text]


@exercise("figures_by_unit",
          "find every (value, unit) as in extract_quantities, then group: one entry per unit, "
          "holding the sorted distinct values")
def _():
    for text in _figure_articles():
        found = _pipeline.quantities(text)
        yield Case((text,), {u: sorted({v for v, w in found if w == u}) for _, u in found})


def _condensed_follow_ups() -> int:
    rc = _pipeline.RuleCondenser()
    return sum(rc.condense(q.text, list(q.turns)) != q.text
               for q in _datasets.load_helpcentre().questions if q.category == "follow_up")


@exercise("predict_condensed_follow_ups",
          "the rule condenser only rewrites a message it recognises as a follow-up (short, or "
          "opening with 'and', 'what about', ...)")
def _():
    actual = _condensed_follow_ups()
    yield Case((), verify=_predicted(actual, lambda p: abs(p - actual) <= 3,
                                     "a prediction within 3 passes"))


# ---------------------------------------------------------------------------------------
# Chapter 11: beyond one machine (Milvus)
from .backends import compare as _compare  # noqa: E402
from .backends import expressions as _expressions  # noqa: E402
from .backends import sizing as _sizing  # noqa: E402


@exercise("milvus_term",
          "metadata[<quoted key>] <operator> <literal>: strings in double quotes with \\ and \" "
          "(and newline, return, tab) escaped, bools as true/false; $ne also lets a missing key "
          "through (is null or ...); $in is == terms joined by or, in parentheses when there are "
          "several")
def _():
    for key, op, value in (("status", "$eq", "current"), ("seats", "$gte", 10),
                           ("price", "$lt", 9.5), ("archived", "$eq", False),
                           ("status", "$ne", "superseded"), ("plan", "$in", ["pro"]),
                           ("plan", "$in", ["pro", "team", "enterprise"]),
                           ("title", "$eq", 'the "new" policy'), ("path", "$eq", "C:\\data"),
                           ("note", "$eq", "two\nlines"), ('odd "key"', "$gt", 1)):
        yield Case((key, op, value), _expressions.milvus_filter({key: {op: value}}))


@exercise("bytes_per_vector",
          "dim numbers of 4 (float32), 2 (float16) or 1 (int8) bytes; binary is one bit per "
          "number; product quantisation keeps one byte per sub-vector: pq_m bytes",
          mistakes=(Mistake("a byte per number for binary", "binary keeps one bit per number: "
                            "dim / 8 bytes", lambda dim, encoding, pq_m: dim if encoding ==
                            "binary" else _sizing.bytes_per_vector(dim, encoding, pq_m)),))
def _():
    for dim, encoding, pq_m in ((384, "float32", None), (1536, "float32", None),
                                (768, "float16", None), (384, "int8", None),
                                (1024, "binary", None), (384, "pq", 48), (768, "pq", 96)):
        yield Case((dim, encoding, pq_m), _sizing.bytes_per_vector(dim, encoding, pq_m))


@exercise("hnsw_graph_bytes",
          "4 bytes per link: 2*M links on the bottom layer, plus M links on each upper layer, "
          "which add up to M / (M - 1) links on average",
          mistakes=(Mistake("the bottom layer only", "the upper layers add M / (M - 1) links "
                            "per node on average", lambda m: 4 * 2 * m),
                    Mistake("links, not bytes", "each link is a 4-byte id: multiply by 4",
                            lambda m: 2 * m + m / (m - 1))))
def _():
    for m in (16, 32, 8, 48, 2):
        yield Case((m,), _sizing.hnsw_graph_bytes(m))


@exercise("shards_needed",
          "each machine may use only fill * node_bytes; divide and round up (math.ceil), and "
          "never answer fewer than 1",
          mistakes=(Mistake("no floor of one machine", "even an empty index needs a machine: "
                            "max(1, ...)", lambda total, node, fill:
                            math.ceil(total / (node * fill))),
                    Mistake("rounded down", "a partial machine is a whole machine: math.ceil",
                            lambda total, node, fill: max(1, int(total // (node * fill))))))
def _():
    gib = 2**30
    for total, node, fill in ((16.7e9, 64 * gib, 0.7), (167e9, 64 * gib, 0.7),
                              (167e9, 256 * gib, 0.8), (0, 64 * gib, 0.7),
                              (100, 100, 1.0), (101, 100, 1.0), (5.2e9, 16 * gib, 0.5)):
        yield Case((total, node, fill), _sizing.shards_needed(total, node, fill))


@exercise("overlap_at_k",
          "compare the sets of the first k ids of each list and divide the shared count by k "
          "(by the longer list's length when both have fewer than k); two empty lists agree: 1.0",
          mistakes=(Mistake("always dividing by k", "when both lists have fewer than k ids, "
                            "divide by the longer one's length; two empty lists agree (1.0)",
                            lambda a, b, k: len(set(a[:k]) & set(b[:k])) / k),))
def _():
    for a, b, k in ((["a", "b", "c"], ["c", "a", "d"], 3), (["a", "b", "c"], ["c", "b", "a"], 3),
                    (["a", "b", "c", "d"], ["a", "x", "y", "z"], 2),
                    (["a", "b"], ["a", "b"], 10), (["a", "b", "c"], ["a"], 10), ([], [], 5),
                    (list("abcdefghij"), list("abcdefghxy"), 10)):
        yield Case((a, b, k), _compare.overlap_at_k(a, b, k))


# -- chapter 11 on the real corpus

@exercise("corpus_vector_bytes",
          "per vector: bytes_per_vector(dim, encoding, pq_m), plus hnsw_graph_bytes(hnsw_m) when "
          "hnsw_m is given; times the number of vectors")
def _():
    n_py = len(_datasets.load_pydocs().documents)
    n_hc = len(_datasets.load_helpcentre().documents)
    for n, dim, enc, pq, m in ((n_py, 384, "float32", None, None), (n_py, 384, "float32", None, 16),
                               (n_py, 768, "pq", 96, 32), (n_hc, 384, "int8", None, None),
                               (n_hc * 1000, 1024, "binary", None, 16)):
        per = _sizing.bytes_per_vector(dim, enc, pq) + (_sizing.hnsw_graph_bytes(m) if m else 0)
        yield Case((n, dim, enc, pq, m), n * per)


@exercise("predict_pydocs_mib",
          "each section is one vector of 384 float32 numbers; count the sections, multiply, "
          "divide by 2**20")
def _():
    n = len(_datasets.load_pydocs().documents)
    actual = n * _sizing.bytes_per_vector(384, "float32", None) / 2**20
    yield Case((), verify=_predicted(actual, lambda p: abs(p - actual) <= 0.25 * actual,
                                     "a prediction within 25% passes"))


# ---------------------------------------------------------------------------------------
# Chapter 10: making it better
from . import contextual as _contextual  # noqa: E402
from . import expansion as _expansion  # noqa: E402
from . import retrieval as _retrieval  # noqa: E402
from .types import Chunk as _Chunk  # noqa: E402
from .types import Document as _Document  # noqa: E402


class _Replay:
    """A retriever that returns stored hits in order: the grader's stand-in for an index."""

    corpus_fingerprint = "replay"

    def __init__(self, hits):
        self.hits = list(hits)

    def search(self, query, k=10, where=None):
        return self.hits[:k]

    def __len__(self):
        return len(self.hits)


@exercise("parents_for_children",
          "walk the children best first; the parent of a child is the one of the same document "
          "with start <= child start < end; keep each parent the first time you meet it, stop at k")
def _():
    parents = [("a#0", "a", 0, 900), ("a#1", "a", 900, 1700), ("b#0", "b", 0, 400),
               ("c#0", "c", 0, 1000), ("c#1", "c", 1000, 1800)]
    chunks = [_Chunk(pid, doc, "x" * (e - s), s, e) for pid, doc, s, e in parents]
    for children, k in (([("a", 10), ("a", 950), ("b", 0)], 3),
                        ([("a", 10), ("a", 300), ("c", 1200), ("a", 899), ("b", 40)], 3),
                        ([("c", 1500), ("c", 1000), ("c", 999), ("a", 900)], 2),
                        ([("b", 399)], 5),
                        ([("a", 5), ("a", 6), ("a", 7)], 1)):
        hits = [_Hit(f"{d}:{s}", 1.0 - n / 100, n + 1, d, "x", {}, s, s + 1)
                for n, (d, s) in enumerate(children)]
        pdr = _expansion.ParentDocumentRetriever(_Replay(hits), chunks, fetch=len(hits))
        yield Case((children, parents, k), [h.id for h in pdr.search("q", k=k)])


_SENTENCES = ("Refunds are issued to the original card. Annual plans get 14 days. Monthly plans "
              "get 30 days. Seats added later follow the plan. Ask billing for anything else.")


@exercise("sentence_window",
          "the window runs from sentence i - n to sentence i + n, both included, clipped to the "
          "first and last sentence; return (start of its first sentence, end of its last)")
def _():
    spans = _expansion.sentence_spans(_SENTENCES)
    doc = _Document("d", _SENTENCES)
    for i, n in ((2, 1), (0, 1), (4, 2), (2, 0), (1, 10), (3, 1)):
        hit = _Hit("d:s", 1.0, 1, "d", _SENTENCES[slice(*spans[i])], {}, *spans[i])
        swr = _expansion.SentenceWindowRetriever(_Replay([hit]), [doc], window=n)
        yield Case((spans, i, n), swr.widen(hit))


_MARKDOWN = ("# Plans\n\nIntro.\n\n## Pro\n\nPro has SSO.\n\n### Limits\n\nTen seats.\n\n"
             "## Team\n\nTeam has more.\n\n# Billing\n\nInvoices monthly.")


@exercise("section_path",
          "go through the headings that start at or before the offset; a heading of level L "
          "replaces every open heading of level >= L; return the open headings' titles")
def _():
    doc = _Document("d", _MARKDOWN)
    for where in ("Intro.", "Pro has", "Ten seats", "Team has", "Invoices", "## Pro"):
        offset = _MARKDOWN.index(where)
        yield Case((_MARKDOWN, offset), _contextual.section_path(doc, offset))
    yield Case(("Plain text, no headings.", 5),
               _contextual.section_path(_Document("p", "Plain text, no headings."), 5))


def _fit_whole(lengths, budget, skip):
    """Whole hits only, stopping at (or, with ``skip``, passing over) one that does not fit."""
    out, left = [], budget
    for n in lengths:
        if n > left and not skip:
            break
        if n <= left:
            out.append(n)
            left -= n
    return out


@exercise("fit_budget",
          "take each hit whole while it fits in what is left of the budget; the first that does "
          "not fit gets only what is left (if anything is); nothing after it",
          mistakes=(Mistake("the hit that does not fit dropped", "the first hit that does not "
                            "fit is cut to what is left, not left out", lambda lengths, budget:
                            _fit_whole(lengths, budget, skip=False)),
                    Mistake("a hit that does not fit skipped", "stop after the first hit that "
                            "does not fit (cut to what is left): later, shorter hits are less "
                            "relevant", lambda lengths, budget:
                            _fit_whole(lengths, budget, skip=True))))
def _():
    for lengths, budget in (([200, 200, 200], 512), ([256, 256], 512), ([1000, 50], 256),
                            ([100, 300, 50], 350), ([40, 60], 1024), ([300, 10], 300)):
        hits = [_Hit(f"h{n}", 1.0, n + 1, "d", " ".join(["w"] * size))
                for n, size in enumerate(lengths)]
        handed = _expansion.fit_budget(hits, budget, length="words")
        yield Case((lengths, budget), [len(h.text.split()) for h in handed])


@exercise("where_matches",
          "every key must hold: a bare value means equal, a list means one of, a dict maps "
          "operators ($eq $ne $in $nin $gt $gte $lt $lte) to values; a missing key fails all but "
          "$ne and $nin")
def _():
    current = {"status": "current", "updated": "2025-06-11", "department": "billing"}
    retired = {"status": "superseded", "updated": "2024-02-10", "department": "billing",
               "superseded_by": "billing-refund-policy"}
    for meta in (current, retired):
        for where in ({"status": "current"}, {"status": {"$ne": "superseded"}},
                      {"department": ["billing", "account"], "status": "current"},
                      {"updated": {"$gte": "2025-01-01", "$lt": "2026-01-01"}},
                      {"superseded_by": {"$nin": ["api-rate-limits"]}},
                      {"access": "public"}):
            yield Case((meta, where), _retrieval.matches(meta, where))


# -- chapter 10 on the real corpus

def _heading_cases():
    for doc_id in ("billing-refund-policy", "api-rate-limits", "security-sso-setup"):
        doc = _datasets.load_helpcentre().doc(doc_id)
        offsets = [c.start for c in _chunking.chunk_documents([doc], size=300, overlap=0,
                                                                length="chars")]
        yield doc.text, offsets, [_contextual.section_path(_Document("d", doc.text), o)
                                  for o in offsets]


@exercise("heading_paths",
          "section_path at each offset: the headings that start at or before it, each heading "
          "of level L closing the open ones of level >= L")
def _():
    for text, offsets, expected in _heading_cases():
        yield Case((text, offsets), expected)


def _whole_in_budget() -> int:
    q = _hc_questions(1)[0]
    hits = _hc_bm25().search(q.text, k=10)
    handed = _expansion.fit_budget(hits, 512, length="words")
    return sum(len(h.text) == len(o.text) for h, o in zip(handed, hits, strict=False))


@exercise("predict_whole_in_budget",
          "a help-centre article runs to a few hundred words, so a 512-word budget holds only a "
          "couple of whole articles")
def _():
    actual = _whole_in_budget()
    yield Case((), verify=_predicted(actual, lambda p: abs(p - actual) <= 1,
                                     "a prediction within 1 passes"))


# ---------------------------------------------------------------------------------------
# Chapter 12: the capstone
_CAPSTONE_FLOOR = 0.5  # BM25 recall@5 the shipped corpus's questions must reach


def _pkgdocs_folder() -> _Path:
    return _datasets.data_dir() / "pkgdocs" / "readmes"


@_lru_cache(maxsize=1)
def _pkgdocs() -> tuple:
    return tuple(_ingest.read_documents(_pkgdocs_folder()))


@_lru_cache(maxsize=2)
def _pkgdocs_bm25(chunked: bool):
    items = (_chunking.chunk_documents(_pkgdocs(), size=1500, overlap=150, length="chars")
             if chunked else _pkgdocs())
    return _bm25.BM25Index().build(items)


def _capstone_problem(result) -> str | None:
    """What is wrong with a (folder, questions) pair, or None."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        return "expected a pair (folder, questions)"
    folder, questions = result
    if not isinstance(folder, (str, _Path)) or not _Path(folder).is_dir():
        return f"the folder {_show(folder, 80)} is not a folder on this machine"
    try:
        ids = {d.id for d in _ingest.read_documents(folder)}
    except Exception as err:
        return f"read_documents could not read the folder: {_describe(err)}"
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
        path = _Path(folder) / q["gold"]
        if not path.is_file() or _Path(q["gold"]).with_suffix("").as_posix() not in ids:
            return (f"question {n}: gold file {q['gold']!r} is not a document of the folder; "
                    f"give its path relative to the folder, suffix included")
        passage = q.get("passage")
        if passage is not None:
            text = " ".join(path.read_text(encoding="utf-8").split())
            if not isinstance(passage, str) or " ".join(passage.split()) not in text:
                return f"question {n}: the passage is not in {q['gold']} (copy it verbatim)"
    if _Path(folder).resolve() == _pkgdocs_folder().resolve():
        qrels = {f"q{n}": {_Path(q["gold"]).with_suffix("").as_posix(): 1}
                 for n, q in enumerate(questions)}
        run = _ev.retrieve_run(_pkgdocs_bm25(False),
                               [(f"q{n}", q["question"]) for n, q in enumerate(questions)], k=5)
        recall = _ev.evaluate(qrels, run, "recall@5")
        if recall < _CAPSTONE_FLOOR:
            return (f"BM25 finds only {recall:.0%} of your gold files in its top 5 (the floor "
                    f"is {_CAPSTONE_FLOOR:.0%}); check the labels, or make the questions "
                    f"specific enough to have one answering file")
    return None


@exercise("my_corpus_and_questions",
          "return (folder, questions): a folder of .md files and a list of 10 dicts, each with "
          "'question', 'gold' (a file path relative to the folder) and, ideally, 'passage' "
          "(text copied from that file)")
def _():
    yield Case((), verify=_capstone_problem)


def _title_questions(n: int | None = None) -> list[dict]:
    """Questions the grader makes from the shipped corpus: each file's title, gold = that file."""
    return [{"question": d.title, "gold": f"{d.id}.md"} for d in _pkgdocs()[:n]]


@exercise("evaluate_retriever",
          "qrels = {question id: {gold id: 1}} with gold id = the file path without suffix; "
          "run = retrieve_run(retriever, [(question id, text), ...], k=k, level='doc'); "
          "return evaluate(qrels, run, [f'recall@{k}', f'mrr@{k}'])")
def _():
    for chunked, n, k in ((False, None, 1), (False, 8, 3), (True, None, 5), (True, None, 10)):
        questions = _title_questions(n)
        qrels = {f"q{i}": {q["gold"][:-3]: 1} for i, q in enumerate(questions)}
        run = _ev.retrieve_run(_pkgdocs_bm25(chunked),
                               [(f"q{i}", q["question"]) for i, q in enumerate(questions)], k=k)
        yield Case((_pkgdocs_bm25(chunked), questions, k),
                   verify=_same_metrics(_ev.evaluate(qrels, run, [f"recall@{k}", f"mrr@{k}"])))


def _same_metrics(expected: dict):
    """A verify for a {metric: value} dict: same keys, values within 1e-9."""
    def verify(got):
        if not isinstance(got, dict) or set(got) != set(expected) or not all(
                _same(got[m], v, 1e-9) for m, v in expected.items()):
            return f"expected: {_show(expected)}\n  got:      {_show(got)}"
        return None
    return verify
