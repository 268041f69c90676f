"""Composition through the contracts: every component declares its settings and fingerprint,
caches key on that fingerprint, the pipeline never re-runs a retriever with settings of its
own, and a threshold is only ever compared with the quantity it was set on."""
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import ragbook
from ragbook import BM25Index, DenseIndex, Encoder, HybridRetriever, load_helpcentre
from ragbook.cache import CachedPipeline, CachedRetriever
from ragbook.chunking import chunk_documents
from ragbook.component import SECRETS, Component
from ragbook.pipeline import Pipeline
from ragbook.readers import SentenceReader
from ragbook.rerank import CrossEncoderReranker
from ragbook.result import with_history
from ragbook.retrieval import CONFIDENCE_KINDS, BaseRetriever
from ragbook.widgets import threshold_counts

ROOT = Path(__file__).resolve().parents[1]
HC = load_helpcentre()


def public_component_classes() -> list[type]:
    """Every Component subclass a public module of ragbook exports."""
    found = {}
    for info in pkgutil.walk_packages(ragbook.__path__, "ragbook."):
        if info.name.split(".")[-1].startswith("_"):
            continue
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name, None)
            if inspect.isclass(obj) and issubclass(obj, Component) and obj is not Component \
                    and not inspect.isabstract(obj) and obj.__module__.startswith("ragbook."):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[k] for k in sorted(found)]


# What to pass where a default cannot be varied mechanically (required arguments, None, str).
# base: the value used when the argument is required; alt: a different value to try.
def _values():
    from ragbook.llm import LocalLLM
    from ragbook.rerank import WindowScorer
    from ragbook.stores.milvus import MILVUS_STANDARD

    bm25 = BM25Index()
    return {
        "retriever": (bm25, BM25Index(k1=2.0)),
        "dense": (DenseIndex(Encoder()), DenseIndex(Encoder(max_length=64))),
        "bm25": (bm25, BM25Index(b=0.5)),
        "pipeline": (Pipeline(bm25, reader=SentenceReader()), Pipeline(bm25, keep=3,
                                                                       reader=SentenceReader())),
        "encoder": (None, Encoder(max_length=64)),
        "model": (None, WindowScorer(size=40, overlap=10)),
        "scorer": (None, ragbook.MaxSimScorer(dense_weight=0.3)),
        "windows": (None, WindowScorer(size=40, overlap=10)),
        "reranker": (None, CrossEncoderReranker(min_rerank_score=0.2)),
        "reader": (None, SentenceReader(min_words=5)),
        "condenser": (None, ragbook.RuleCondenser(max_words=4)),
        "fallback": (None, ragbook.RuleCondenser(max_words=4)),
        "llm": (None, LocalLLM(max_new_tokens=17)),
        "profile": (None, "standard"),
        "tokenizer": (None, ragbook.Tokenizer(split_compounds=True)),
        "kind": ("flat", "hnsw"),
        "role": ("encoder", "prefix_encoder"),
        "uri": (None, "other.db"),
        "collection": ("ragbook", "other"),
        "mode": ("hybrid", "dense"),
        "base_url": ("http://127.0.0.1:9", "http://127.0.0.1:10"),
        "trace_path": (None, "trace.jsonl"),
        "path": (None, ":memory:"),
        "min_confidence_kind": (None, "cosine"),
        "weights": ((1.0, 1.0), (2.0, 1.0)),
        "dim": (8, 16),
        "store": (None, "faiss-hnsw"),
        "index": ("FLAT", "HNSW"),
        "stop": (None, ("###",)),
        "abstain_logprob": (None, -1.5),
        "gate": (None, SentenceReader()),
        "parents": (chunk_documents(HC.documents[:3], size=256, overlap=0),
                    chunk_documents(HC.documents[:2], size=256, overlap=0)),
        "documents": (HC.documents[:3], HC.documents[:2]),
        "analyzer": (None, MILVUS_STANDARD),
        "scoring": ("cosine", "late"),
    }


# Where one setting name needs another value for one class (a chat model's name is a str).
PER_CLASS = {"OpenAICompatibleLLM": {"model": ("local", "other")}}


def _alternative(cls, name, default, values):
    values = {**values, **PER_CLASS.get(cls.__name__, {})}
    if name in values:
        return values[name][1]
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + 1
    if isinstance(default, float):
        return default + 0.25
    if default is None and name.startswith("min_"):
        return 0.3 if name != "min_bm25" else 1.5
    if default is None and name == "ttl":
        return 60.0
    raise AssertionError(f"no alternative value for {cls.__name__}({name}=...): add one to "
                         f"_values() in tests/test_compose.py")


def _build(cls, values, **override):
    values = {**values, **PER_CLASS.get(cls.__name__, {})}
    kwargs = {}
    for name, p in list(inspect.signature(cls.__init__).parameters.items())[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if name in override:
            kwargs[name] = override[name]
        elif p.default is p.empty or (name in values and values[name][0] is not None
                                      and p.default is None):
            kwargs[name] = values[name][0]
    if "store" in kwargs and kwargs["store"] == "faiss-hnsw":
        kwargs["store"] = ragbook.FaissStore(kind="hnsw")
    return cls(**kwargs)


def _namespace(obj):
    """The cache namespace of a cache built on ``obj`` (through a pipeline for the parts that
    are not retrievers)."""
    if isinstance(obj, Pipeline):
        return CachedPipeline(obj, path=":memory:").cache.namespace
    if callable(getattr(obj, "retrieve", None)):
        return CachedRetriever(obj, path=":memory:").cache.namespace
    for slot in ("reranker", "reader", "condenser"):
        try:
            p = Pipeline(BM25Index(), reader=SentenceReader(), **{slot: obj})
        except (TypeError, AttributeError):
            continue
        return CachedPipeline(p, path=":memory:").cache.namespace
    return None


CLASSES = public_component_classes()


def test_the_component_classes_are_found():
    names = {c.__name__ for c in CLASSES}
    assert {"BM25Index", "DenseIndex", "HybridRetriever", "RerankedRetriever",
            "CachedRetriever", "CrossEncoderReranker", "SentenceReader", "ExtractiveReader",
            "GenerativeReader", "RuleCondenser", "LLMCondenser", "Pipeline",
            "CachedPipeline"} <= names


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_changing_any_one_setting_changes_the_fingerprint_and_the_cache_namespace(cls):
    values = _values()
    base = _build(cls, values)
    settings = base.settings(deep=False)
    assert list(settings) == [n for n in cls._setting_names()]
    assert base.fingerprint == _build(cls, values).fingerprint        # deterministic
    namespace = _namespace(base)
    for name, p in list(inspect.signature(cls.__init__).parameters.items())[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or name in SECRETS:
            continue            # a key says who may ask, not what the answer is
        default = settings[name] if p.default is p.empty else p.default
        alt = _alternative(cls, name, default, values)
        changed = _build(cls, values, **{name: alt})
        if name in cls.neutral_settings:   # declared to change no answer: caches keep working
            assert changed.fingerprint == base.fingerprint, f"{cls.__name__}({name}=...)"
            continue
        assert changed.fingerprint != base.fingerprint, f"{cls.__name__}({name}=...)"
        if namespace is not None:
            assert _namespace(changed) != namespace, f"cache namespace of {cls.__name__}({name})"


def test_neutral_settings_are_settings_and_few():
    """Only settings that exist can be declared neutral, and none that picks a model, a
    corpus or a threshold (those change answers)."""
    for cls in CLASSES:
        assert cls.neutral_settings <= set(cls._setting_names()), cls.__name__
        assert not {n for n in cls.neutral_settings
                    if n.startswith(("min_", "max_")) or n in {"model", "encoder", "profile"}}
    assert Pipeline.neutral_settings == {"trace_path"}


def test_a_copy_with_other_settings_leaves_the_original_alone():
    reranker = CrossEncoderReranker()
    copy = reranker.with_settings(min_rerank_score=0.4)
    assert (copy.min_rerank_score, reranker.min_rerank_score) == (0.4, None)
    assert repr(copy) == "CrossEncoderReranker(min_rerank_score=0.4)"
    with pytest.raises(TypeError, match="has no setting 'threshold'"):
        reranker.with_settings(threshold=0.4)
    with pytest.raises(ValueError, match="min_rerank_score"):
        reranker.with_settings(min_rerank_score=float("nan"))


# -- the pipeline uses the retriever's own settings -----------------------------------------
def test_the_pipeline_asks_each_channel_for_the_hybrids_own_depth(hc_chunks):
    assert len(hc_chunks) > 40
    hybrid = HybridRetriever(DenseIndex(Encoder()), BM25Index(), depth=20, rrf_k=5)
    hybrid.build(hc_chunks)
    p = Pipeline(hybrid, reader=SentenceReader(min_span_score=None))
    prep = p.prepare("how long is the refund window for enterprise contracts?")
    stages = {s.name: s for s in prep.trace}
    assert stages["dense"].detail["count"] == 20 and stages["dense"].detail["depth"] == 20
    assert 0 < stages["bm25"].detail["count"] <= 20
    assert stages["fuse"].detail["rrf_k"] == 5
    fused = hybrid.search("how long is the refund window for enterprise contracts?", k=50,
                          where={"status": {"$ne": "superseded"}})     # exclude_superseded
    assert [h.id for h in prep.candidates] == [h.id for h in fused][:p.keep]


def test_the_hybrids_floor_applies_inside_the_pipeline(hc_chunks):
    hybrid = HybridRetriever(DenseIndex(Encoder()), BM25Index(), depth=20, rrf_k=5,
                             min_rrf=0.9).build(hc_chunks)
    r = Pipeline(hybrid).ask("how long is the refund window for enterprise contracts?")
    assert r.escalated and r.reason == "no_candidates"                 # nothing clears 0.9


def test_a_threshold_is_only_compared_with_its_own_quantity(hc_hybrid):
    hybrid = hc_hybrid
    assert Pipeline(hybrid).confidence_kind == "cosine"
    assert Pipeline(hybrid.bm25).confidence_kind == "bm25"
    with pytest.raises(ValueError, match="a cosine threshold.*bm25 score"):
        Pipeline(hybrid.bm25, min_confidence=0.5, min_confidence_kind="cosine")
    rerank = Pipeline(hybrid, reranker=CrossEncoderReranker(), min_confidence=3.0)
    assert rerank.confidence_kind == "rerank"      # reranker scores are unbounded: accepted
    with pytest.raises(ValueError, match="a cosine threshold.*rerank score"):
        Pipeline(hybrid, reranker=CrossEncoderReranker(), min_confidence=0.5,
                 min_confidence_kind="cosine")
    prep = Pipeline(hybrid.bm25).prepare("refund window")
    with pytest.raises(ValueError, match="carries a bm25 confidence"):
        Pipeline(hybrid).decide(prep)


class _Fused(BaseRetriever):
    """A retriever whose confidence is an RRF score, as a server-side hybrid's is."""

    confidence_kind = "rrf"

    def __init__(self, hybrid=None):
        self.hybrid = hybrid

    def search(self, query, k=10, where=None):
        return self.hybrid.search(query, k=k, where=where)

    def confidence_bounds(self):
        return 0.0, 2 / 61

    def __len__(self):
        return len(self.hybrid)

    @property
    def corpus_fingerprint(self):
        return self.hybrid.corpus_fingerprint


def test_an_rrf_confidence_is_never_compared_with_a_cosine_threshold(hc_hybrid):
    fused = _Fused(hc_hybrid)
    with pytest.raises(ValueError, match="outside what this pipeline's confidence can be"):
        Pipeline(fused, min_confidence=0.5)
    with pytest.raises(ValueError, match="a cosine threshold.*rrf score"):
        Pipeline(fused, min_confidence=0.02, min_confidence_kind="cosine")
    assert Pipeline(fused, min_confidence=0.02).min_confidence == 0.02
    assert set(CONFIDENCE_KINDS) == {"cosine", "bm25", "rrf", "rerank"}


def test_the_threshold_widget_moves_the_one_rerank_cut(hc_hybrid):
    hybrid = hc_hybrid
    pipeline = Pipeline(hybrid, reranker=CrossEncoderReranker(), candidates=20)
    questions = HC.split("dev")[:8]
    prepared = [pipeline.prepare(*with_history(q)) for q in questions]
    scores = sorted(p.candidates[0].score for p in prepared)
    floor = scores[len(scores) // 2]
    counts = threshold_counts(pipeline, prepared, questions, None, min_rerank_score=floor)
    moved = Pipeline(hybrid, reranker=CrossEncoderReranker(min_rerank_score=floor),
                     candidates=20)
    outcomes = [ragbook.result.outcome(moved.ask(*with_history(q)), q.gold)
                for q in questions]
    assert counts["escalated"] == outcomes.count("escalated") >= len(questions) // 2
    assert (counts["right"], counts["wrong"]) == (outcomes.count("right"),
                                                  outcomes.count("wrong"))


# -- caches key on fingerprints --------------------------------------------------------------
def test_two_hybrids_with_other_settings_do_not_share_a_cache(hc_chunks, tmp_path):
    dense, bm25 = DenseIndex(Encoder()).build(hc_chunks), BM25Index().build(hc_chunks)
    a = CachedRetriever(HybridRetriever(dense, bm25, depth=100), path=tmp_path / "c.sqlite")
    b = CachedRetriever(HybridRetriever(dense, bm25, depth=5), path=tmp_path / "c.sqlite")
    q = "how long is the refund window for enterprise contracts?"
    assert a.search(q, k=10) != b.search(q, k=10)
    assert b.search(q, k=10) == b.retriever.search(q, k=10)
    got = a.retrieve(q, k=10)
    assert got.confidence_kind == "cosine" and [s.name for s in got.stages] == ["cache"]
    assert got.confidence == a.retriever.retrieve(q, k=10).confidence


def test_a_page_marked_superseded_is_a_different_corpus_for_a_cache(tmp_path):
    from dataclasses import replace

    docs = HC.documents[:6]
    old = BM25Index().build(docs)
    marked = BM25Index().build([replace(docs[0], metadata={**docs[0].metadata,
                                                            "status": "superseded"}),
                                *docs[1:]])
    assert old.corpus_fingerprint != marked.corpus_fingerprint
    assert CachedRetriever(old, path=tmp_path / "c").cache.namespace != \
        CachedRetriever(marked, path=tmp_path / "c").cache.namespace


# -- the public face -------------------------------------------------------------------------
def test_the_public_api_lists_what_a_reuser_imports():
    for name in ("Pipeline", "Result", "Retriever", "BaseRetriever", "Retrieved", "Stage",
                 "RerankedRetriever", "NotBuiltError", "CorruptIndexError", "Component",
                 "CachedRetriever", "CachedPipeline", "VectorStore", "CrossEncoderReranker"):
        assert name in ragbook.__all__ and hasattr(ragbook, name), name
    assert len(set(ragbook.__all__)) == len(ragbook.__all__)
    for path in (ROOT / "ragbook").rglob("*.py"):
        assert "__all__ +=" not in path.read_text(encoding="utf-8"), path


_IMPORT = re.compile(r"^\s*from\s+(ragbook[\w.]*)\s+import\s+(\([^)]*\)|[^\n]*)", re.M)
_ATTRIBUTE = re.compile(r"\bragbook(?:\.\w+)*\._[^\W_]\w*")


def private_names(code: str) -> list[str]:
    """The ``_private`` ragbook names ``code`` imports or reaches by attribute."""
    found = [m.group(0) for m in _ATTRIBUTE.finditer(code)]
    for module, names in _IMPORT.findall(code):
        if any(part.startswith("_") for part in module.split(".")):
            found.append(module)
        names = re.sub(r"#[^\n]*", "", names).strip("()")
        found += [f"{module}.{n.split()[0]}" for n in names.split(",")
                  if n.strip() and re.match(r"_[^_]", n.split()[0])]
    return found


def test_no_notebook_exercise_or_solution_uses_a_private_name():
    import nbformat

    offenders = []
    for folder in ("notebooks", "solutions", "exercises"):
        for path in sorted((ROOT / folder).glob("*")):
            if path.suffix == ".py":
                text = path.read_text(encoding="utf-8")
            elif path.suffix == ".ipynb":
                nb = nbformat.read(path, as_version=4)
                text = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
            else:
                continue
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in private_names(text)]
    assert not offenders, offenders


def test_the_private_import_check_can_fail():
    assert private_names("from ragbook.widgets import _hc, TopK") == ["ragbook.widgets._hc"]
    assert private_names("from ragbook.grading import (\n  check,\n  _case,\n)") == [
        "ragbook.grading._case"]
    assert private_names("x = ragbook.models._loaded") == ["ragbook.models._loaded"]
    assert private_names("from ragbook.widgets import TopK  # not _private") == []
