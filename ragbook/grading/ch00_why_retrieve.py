"""Chapter 0 (solutions/00-why-retrieve.py): the cost arithmetic of sending every document
to the model, against retrieving a few, on sample workloads and on the help centre."""
from __future__ import annotations

from .. import cost
from .core import Case, Chapter, Mistake, predicted
from .corpus import answerable_dev_questions, bm25_ranking, helpcentre_tokens

CHAPTER = Chapter("00-why-retrieve")

_WORKLOADS = [cost.Workload(), cost.Workload(corpus_docs=1_000, tokens_per_doc=300),
              cost.Workload(corpus_docs=50_000, tokens_per_doc=1_200, price_per_million=0.5,
                            parallelism=64, k=8),
              cost.Workload(corpus_docs=7, parallelism=3, k=2)]


@CHAPTER.exercise("naive_tokens", "every question sends every document: docs x tokens per doc")
def naive_tokens_cases():
    """Each sample workload's document count and length; the naive prompt's token count."""
    for w in _WORKLOADS:
        yield Case((w.corpus_docs, w.tokens_per_doc), cost.naive(w).input_tokens)


@CHAPTER.exercise("naive_dollars", "tokens / 1,000,000 x price per million",
                  mistakes=(Mistake("a price per token", "the price is per million tokens: "
                                    "divide the token count by 1,000,000",
                                    lambda docs, tokens, price: docs * tokens * price),))
def naive_dollars_cases():
    """Each sample workload's documents, length and price; the naive question's dollars."""
    for w in _WORKLOADS:
        yield Case((w.corpus_docs, w.tokens_per_doc, w.price_per_million), cost.naive(w).dollars)


@CHAPTER.exercise(
    "parallel_latency",
    "calls run in waves of `parallelism`; a last, partial wave still takes a full call "
    "(math.ceil)",
    mistakes=(Mistake("waves not rounded up", "a last, partial wave still takes a whole "
                      "call: math.ceil(docs / parallelism) waves",
                      lambda docs, par, latency: docs / par * latency),
              Mistake("waves rounded down", "// drops the last, partial wave; it still "
                      "takes a whole call: math.ceil",
                      lambda docs, par, latency: docs // par * latency)))
def parallel_latency_cases():
    """Each sample workload's documents, parallelism and call latency; the naive latency."""
    for w in _WORKLOADS:
        yield Case((w.corpus_docs, w.parallelism, w.call_latency_s),
                   cost.naive(w).latency_parallel_s)


@CHAPTER.exercise("cost_of_k",
                  "the reader reads k documents once: k x tokens per doc x price / 1e6")
def cost_of_k_cases():
    """Three values of k per sample workload; what a retriever-reader question costs."""
    for w in _WORKLOADS:
        for k in (1, w.k, min(w.corpus_docs, 20)):
            w2 = cost.Workload(corpus_docs=w.corpus_docs, tokens_per_doc=w.tokens_per_doc,
                               price_per_million=w.price_per_million, k=k)
            yield Case((k, w.tokens_per_doc, w.price_per_million),
                       cost.retriever_reader(w2).dollars)


# -- on the real corpus

@CHAPTER.exercise("reader_bill",
                  "the reader reads the first k articles of the ranking (fewer if it is "
                  "shorter): sum their token counts, then x price per million / 1,000,000")
def reader_bill_cases():
    """The token counts of BM25's top 10 for three dev questions, at three (k, price)."""
    for q in answerable_dev_questions(3):
        counts = [helpcentre_tokens()[d] for d in bm25_ranking(q.text, 10)]
        for k, price in ((1, 3.0), (5, 3.0), (20, 0.5)):
            yield Case((counts, k, price), cost.context_tokens(counts, k) * price / 1_000_000)


def _naive_ratio() -> float:
    q = answerable_dev_questions(1)[0]
    top5 = sum(helpcentre_tokens()[d] for d in bm25_ranking(q.text, 5))
    return sum(helpcentre_tokens().values()) / top5


@CHAPTER.exercise("predict_naive_ratio",
                  "every article's tokens against the 5 retrieved ones: with equal lengths "
                  "that is the number of articles / 5; retrieved articles are rarely average")
def predict_naive_ratio_cases():
    """The learner's guess of all articles' tokens over the top 5's, within a factor of 2."""
    actual = _naive_ratio()
    yield Case((), verify=predicted(actual, lambda p: actual / 2 <= p <= actual * 2,
                                    "a prediction within a factor of 2 passes"))
