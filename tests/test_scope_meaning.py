"""Scopes with meaning, not just form (ragbook.filters): what each condition means on every
kind of metadata, checked against a plain reference predicate written here from the rules —

* a list value is a set: ``$eq``/``$in`` hold when it holds the value / any of them,
  ``$ne``/``$nin`` when it holds none of them (so a deny-list drops an item with any denied
  value); a missing key or None fails all but ``$ne``/``$nin``; a scope key must be present;
* orderings compare numbers (a stored bool counts as 1 or 0) or ISO dates, never text;
* a scope that constrains nothing is refused;

then, for every retriever and store, that no result of any generated (scope, where) falls
outside the scope as that predicate defines it."""
import logging
import random
from datetime import datetime

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragbook import BM25Index, DenseIndex, Encoder, HybridRetriever
from ragbook.cache import CachedRetriever
from ragbook.filters import matches, scoped, validate_where
from ragbook.stores import FaissStore, MilvusStore, milvus_filter
from ragbook.types import Document

logging.getLogger("pymilvus").setLevel(logging.CRITICAL)

GROUPS = ["public", "internal", "secret", "customer"]
RANGES = {"$gt": lambda v, a: v > a, "$gte": lambda v, a: v >= a,
          "$lt": lambda v, a: v < a, "$lte": lambda v, a: v <= a}


# -- the reference: the rules, in plain Python ------------------------------------------------
def values_of(meta, key):
    """(present, the set of stored values) — a list is its elements, None none."""
    value = meta.get(key)
    if value is None:
        return False, []
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    return True, [v for v in items if v is not None]


def number_or_date(x):
    if isinstance(x, (int, float)):          # a stored bool counts as 1 or 0; ints exact
        return ("number", int(x) if isinstance(x, bool) else x)
    if isinstance(x, str):
        try:
            return ("date", datetime.fromisoformat(x).replace(tzinfo=None)) if len(x) >= 10 \
                else None
        except ValueError:
            return None
    return None


def holds(meta, key, op, arg):
    present, vals = values_of(meta, key)
    if op == "$eq":
        return any(v == arg for v in vals)
    if op == "$in":
        return any(v == a for v in vals for a in arg)
    if op == "$ne":
        return present if arg is None else not any(v == arg for v in vals)
    if op == "$nin":
        if None in arg and not present:
            return False
        return not any(v == a for v in vals for a in arg if a is not None)
    value = meta.get(key)
    if isinstance(value, (list, tuple)):
        return False                                   # an ordering never holds for a list
    v, a = number_or_date(value), number_or_date(arg)
    return v is not None and a is not None and v[0] == a[0] and RANGES[op](v[1], a[1])


def allowed(meta, scope_terms, where_terms=()):
    """Inside the scope (every scope key present, every condition holding) and passing where."""
    return (all(meta.get(key) is not None for key, _, _ in scope_terms)
            and all(holds(meta, *t) for t in scope_terms)
            and all(holds(meta, *t) for t in where_terms))


def as_filter(terms):
    """Terms as the filter language: one {key: {op: arg}} per term, AND-ed."""
    return {"$and": [{key: {op: arg}} for key, op, arg in terms]} if terms else None


# -- generated metadata, scopes and filters ----------------------------------------------------
scalar = st.one_of(st.sampled_from(GROUPS), st.integers(0, 12), st.booleans(), st.none(),
                   st.sampled_from([2**53, 2**53 + 1, 2.0**53]),    # exact past a float's 53 bits
                   st.sampled_from(["3", "10", "2025-06-01", "2024-12-31T23:00",
                                    "2025-06-01 12:00", "2025-06-01T12:00:00+02:00"]))
meta_value = st.one_of(scalar, st.lists(st.one_of(st.sampled_from(GROUPS), st.none()),
                                        max_size=3))
metadata = st.dictionaries(st.sampled_from(["access", "level", "updated", "аccess"]),
                           meta_value, max_size=3)       # "аccess": a Cyrillic look-alike key
term = st.one_of(
    st.tuples(st.just("access"), st.sampled_from(["$eq", "$ne"]), st.sampled_from(GROUPS)),
    st.tuples(st.just("access"), st.sampled_from(["$in", "$nin"]),
              st.lists(st.sampled_from(GROUPS), min_size=1, max_size=3)),
    st.tuples(st.just("level"), st.sampled_from(list(RANGES)),
              st.one_of(st.integers(0, 12), st.just(2**53))),
    st.tuples(st.just("updated"), st.sampled_from(list(RANGES)),
              st.sampled_from(["2025-01-01", "2025-06-01T12:00"])))


@settings(max_examples=400, deadline=None)
@given(metadata, st.lists(term, min_size=1, max_size=3), st.lists(term, max_size=2))
def test_matches_a_scoped_filter_exactly_when_the_reference_allows(meta, scope_terms,
                                                                   where_terms):
    got = matches(meta, scoped(as_filter(where_terms), as_filter(scope_terms)))
    assert got == allowed(meta, scope_terms, where_terms)


# -- the three leaks the hostile probe found ---------------------------------------------------
@pytest.mark.parametrize("vacuous", [{"$and": []}, {"$and": [{}]}, {"$and": [{"$and": []}]},
                                     {"$and": [{}, {"$and": [{}]}]}])
def test_a_scope_that_constrains_nothing_is_refused(vacuous):
    with pytest.raises(ValueError, match="constrains nothing.*scope=None"):
        scoped({"status": "current"}, vacuous)
    assert scoped({"status": "current"}, None) == {"status": "current"}   # no scope: explicit


@pytest.mark.parametrize("vacuous", [{"access": {"$nin": []}}, {"access": {"$nin": ()}},
                                     {"$and": [{"access": {"$nin": []}}]}])
def test_a_scope_of_only_an_empty_deny_list_is_refused(vacuous):
    """{'access': {'$nin': []}} — a user with nothing denied — granted every item with the
    key; an empty deny-list beside a real condition, and an empty allow-list, stay."""
    with pytest.raises(ValueError, match=r"empty deny-list.*scope by what the user may see"):
        scoped(None, vacuous)
    assert not matches({"access": "internal"}, scoped(None, {"access": {"$in": []}}))
    kept = scoped(None, {"tenant": "a", "access": {"$nin": []}})
    assert matches({"tenant": "a", "access": "x"}, kept)
    assert not matches({"tenant": "b", "access": "x"}, kept)


@pytest.mark.parametrize("bound", [np.float64(3), np.int64(3), np.float32(2.5)])
@pytest.mark.parametrize("op", list(RANGES))
def test_a_numpy_range_bound_is_refused_as_a_numpy_equality_is(op, bound):
    """np.float64 is a float, so it passed as a range bound, and milvus_filter wrote it as
    'np.float64(3.0)', which Milvus cannot parse; refused like $eq, with the fix."""
    for where in ({"level": {op: bound}}, {"level": bound}):
        with pytest.raises(TypeError, match=r"numpy scalar: convert it with float\(\)"):
            validate_where(where)
    with pytest.raises(TypeError, match="numpy"):
        milvus_filter({"level": {op: bound}})
    assert milvus_filter({"level": {op: float(bound)}}).endswith(f" {float(bound)!r}")


def test_a_deny_list_drops_an_item_with_any_denied_value():
    deny = scoped(None, {"access": {"$nin": ["internal", "secret"]}})
    assert not matches({"access": ["public", "internal"]}, deny)
    assert not matches({"access": ("secret",)}, deny)
    assert matches({"access": ["public", "customer"]}, deny)
    assert not matches({"access": ["public", "internal"]},
                       scoped(None, {"access": {"$ne": "internal"}}))
    assert matches({"access": ["public", "internal"]}, scoped(None, {"access": ["public"]}))


def test_orderings_compare_numbers_or_dates_never_text():
    with pytest.raises(ValueError, match=r"'3' is text.*write 3"):
        scoped(None, {"level": {"$lte": "3"}})
    with pytest.raises(ValueError, match="is text.*ISO dates"):
        validate_where({"plan": {"$gt": "pro"}})
    with pytest.raises(TypeError, match="finite number or an ISO date"):
        validate_where({"level": {"$lte": True}})
    clearance = scoped(None, {"level": {"$lte": 3}})
    assert [matches({"level": v}, clearance) for v in (2, 3, 3.0, "10", "2", True, [1], None)] \
        == [True, True, True, False, False, True, False, False]
    recent = {"updated": {"$gte": "2025-01-01"}}
    assert [matches({"updated": v}, recent) for v in ("2025-06-11", "2025-01-01T08:00",
                                                      "2024-12-31", "soon", 2026)] \
        == [True, True, False, False, False]


# -- every retriever and store ------------------------------------------------------------------
def corpus(seed=0, n=40):
    rng = random.Random(seed)
    values = [None, "public", "internal", "secret", ["public"], ["public", "internal"],
              ["customer", "secret"], [], ["public", None], 3, True]
    docs = []
    for i in range(n):
        meta = {"access": rng.choice(values),
                "level": rng.choice([1, 3, 5, "2", "10", None, 2**53, 2**53 + 1]),
                "updated": rng.choice(["2024-05-01", "2025-03-01", "2025-09-30", "later",
                                       # instants that sort wrong as the text they are written in
                                       "2025-03-01 12:00", "2025-03-01T09:30:00+02:00",
                                       "2025-03-01T10:00Z", "2025-03-01T09:00:00.5"])}
        meta = {k: v for k, v in meta.items() if v is not None or rng.random() < 0.5}
        docs.append(Document(f"doc-{i}", f"Refund policy note {i}: refunds and invoices "
                             f"for plan {i % 4}.", metadata=meta))
    return docs


def cases(seed=1, n=40):
    rng = random.Random(seed)
    scopes = [[("access", "$nin", ["internal", "secret"])], [("access", "$in", ["public"])],
              [("access", "$ne", "internal")], [("level", "$lte", 3)],
              [("access", "$eq", "public"), ("updated", "$gte", "2025-01-01")],
              [("updated", "$lte", "2025-03-01T09:45")], [("updated", "$gt", "2025-03-01 09:30")],
              [("level", "$lte", 2**53)]]
    wheres = [[], [("access", "$ne", "public")], [("access", "$in", ["internal", "secret"])],
              [("level", "$gt", 1)], [("access", "$nin", ["public"])]]
    return [(rng.choice(scopes), rng.choice(wheres)) for _ in range(n)]


DOCS = corpus()
META = {d.id: d.metadata for d in DOCS}


def check_retriever(retriever, exact=False):
    for scope_terms, where_terms in cases():
        want = {d.id for d in DOCS if allowed(d.metadata, scope_terms, where_terms)}
        hits = retriever.search("refund policy for my plan", k=len(DOCS),
                                where=as_filter(where_terms), scope=as_filter(scope_terms))
        got = {h.doc_id for h in hits}
        assert got <= want, (scope_terms, where_terms, sorted(got - want))
        if exact:
            assert got == want, (scope_terms, where_terms, sorted(want - got))


@pytest.fixture(scope="module")
def encoder():
    return Encoder()


RETRIEVERS = [
    pytest.param(lambda enc: BM25Index().build(DOCS), False, id="bm25"),
    pytest.param(lambda enc: DenseIndex(enc).build(DOCS), True, id="dense-flat"),
    pytest.param(lambda enc: DenseIndex(enc, FaissStore(kind="hnsw")).build(DOCS), False,
                 id="dense-hnsw"),
    pytest.param(lambda enc: HybridRetriever(DenseIndex(enc), BM25Index()).build(DOCS), False,
                 id="hybrid"),
    pytest.param(lambda enc: CachedRetriever(DenseIndex(enc).build(DOCS), path=":memory:"),
                 True, id="cached"),
]


@pytest.mark.parametrize("make, exact", RETRIEVERS)
def test_no_retriever_returns_an_item_outside_the_scope(make, exact, encoder):
    check_retriever(make(encoder), exact)


@pytest.mark.needs_milvus
def test_no_milvus_search_returns_an_item_outside_the_scope(encoder, tmp_path):
    from ragbook.milvus_retriever import MilvusRetriever

    check_retriever(DenseIndex(encoder, MilvusStore(tmp_path / "store.db")).build(DOCS),
                    exact=True)
    with MilvusRetriever(encoder, MilvusStore(tmp_path / "lite.db")).build(DOCS) as milvus:
        for mode in ("dense", "bm25", "hybrid"):
            check_retriever(milvus.with_mode(mode))


# -- the second probe: what a later edit, a number's size or a server key could still do ------
def test_a_hit_or_a_document_edited_afterwards_cannot_move_an_item_into_a_scope():
    doc = Document("d1", "refund policy", metadata={"access": ["internal"], "tier": "x"})
    index = BM25Index().build([doc, Document("d2", "refund policy", metadata={"access": "public"})])
    deny = {"access": {"$nin": ["internal"]}}
    index.search("refund", k=2)[0].metadata["access"].append("public")   # a caller's edit
    next(h for h in index.search("refund", k=2) if h.doc_id == "d1").metadata["tier"] = "y"
    doc.metadata["access"].remove("internal")                            # the source's edit
    assert [h.doc_id for h in index.search("refund", k=2, scope=deny)] == ["d2"]
    assert next(h for h in index.search("refund", k=2) if h.doc_id == "d1").metadata == \
        {"access": ["internal"], "tier": "x"}


def test_integers_compare_exactly_and_past_64_bits_are_refused():
    clearance = scoped(None, {"level": {"$lte": 2**53}})
    assert [matches({"level": v}, clearance) for v in (2**53, 2**53 + 1, 2.0**53)] == \
        [True, False, True]
    with pytest.raises(ValueError, match=r"outside the int64 range.*store it as a str"):
        BM25Index().build([Document("h", "refund", metadata={"level": 10**400})])
    with pytest.raises(ValueError, match="outside the int64 range"):
        validate_where({"level": {"$gt": 2**63}})


@pytest.mark.parametrize("bound", ["nan", "inf", "３", "1_000"])
def test_a_text_bound_is_never_answered_with_advice_that_is_refused_too(bound):
    with pytest.raises(ValueError, match=r"is text.*write a number, or a date"):
        validate_where({"level": {"$lte": bound}})


def test_a_filter_nested_past_the_depth_limit_is_refused_with_a_value_error():
    deep = {"access": "public"}
    for _ in range(3000):
        deep = {"$and": [deep]}
    with pytest.raises(ValueError, match="nests '\\$and' more than 32 levels"):
        scoped(None, deep)


def test_a_server_scope_key_held_as_none_is_not_widened_by_a_request():
    from ragbook.serving.policy import narrow_scope

    fixed = {"access": "public", "tenant": None}           # tenant: matches nothing
    narrowed = narrow_scope(fixed, {"tenant": "acme"})
    assert not matches({"access": "public", "tenant": "acme"}, scoped(None, narrowed))


def test_a_collection_without_comparable_dates_refuses_date_orderings():
    from ragbook.stores import milvus_filter

    with pytest.raises(ValueError, match="older ragbook.*rebuild it"):
        milvus_filter({"updated": {"$gte": "2025-01-01"}}, dates=None)
    assert milvus_filter({"level": {"$gte": 2}}, dates=None) == 'metadata["level"] >= 2'
