"""Cache keys from a canonical, typed encoding (issue 36 item 7): a scope value that is a set
is not its own string, order never matters, and a set in a scope or filter is cached and
traced like any other value — never a TypeError after the answer was computed."""
import subprocess
import sys

import pytest

from ragbook.cache import Cache, CachedPipeline, CachedRetriever
from ragbook.pipeline import Pipeline
from ragbook.result import read_traces

QUESTION = "how long is the refund window?"


@pytest.mark.parametrize("a, b", [
    ({"internal"}, "{'internal'}"),              # a set and its str(): the reported collision
    ({"internal"}, ["internal"]),
    ([1], ["1"]), (True, 1), (1, 1.0), (None, "None"), ({"a": 1}, [["a", 1]]),
    ({"set": ["x"]}, {"x"}),                     # a mapping that looks like the tag
    ({"access": {"$in": {"a", "b"}}}, {"access": {"$in": "{'a', 'b'}"}}),
    (float("nan"), "nan"),
])
def test_values_that_mean_different_things_get_different_keys(a, b):
    assert Cache.key("q", 5, a) != Cache.key("q", 5, b)


def test_a_key_does_not_depend_on_set_or_dict_order_nor_on_the_hash_seed():
    assert Cache.key({"b", "a", "c"}) == Cache.key({"c", "a", "b"})
    assert Cache.key({"x": 1, "y": {2, 3}}) == Cache.key({"y": {3, 2}, "x": 1})
    code = ("from ragbook.cache import Cache; "
            "print(Cache.key({'access': {'$nin': {'internal', 'secret', 'hr', 'x'}}}))")
    keys = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={"PYTHONHASHSEED": seed}, check=True).stdout
            for seed in ("0", "1", "2")}
    assert len(keys) == 1


def test_an_object_whose_text_could_pass_for_a_string_is_refused():
    class Sneaky:
        def __str__(self):
            return "internal"

    with pytest.raises(TypeError, match="a cache key cannot hold a Sneaky"):
        Cache.key({"access": Sneaky()})


def test_a_set_scope_is_never_served_the_cached_results_of_its_string(hc_hybrid, tmp_path):
    cached = CachedRetriever(hc_hybrid, path=tmp_path / "q.sqlite")
    as_set = cached.retrieve(QUESTION, k=5, scope={"access": {"internal"}})
    assert as_set.hits and {h.metadata["access"] for h in as_set.hits} == {"internal"}
    as_text = cached.retrieve(QUESTION, k=5, scope={"access": "{'internal'}"})
    assert as_text.hits == ()                   # no item's access is that literal string
    assert cached.cache.misses == 2 and cached.cache.hits == 0
    again = cached.retrieve(QUESTION, k=5, scope={"access": {"internal"}})
    assert again.hits == as_set.hits and cached.cache.hits == 1


def test_a_set_in_scope_or_where_is_cached_and_traced(hc_hybrid, tmp_path):
    path = tmp_path / "trace.jsonl"
    scope, where = {"access": {"public", "customer"}}, {"status": {"current"}}
    plain = Pipeline(hc_hybrid).ask(QUESTION, where=where, scope=scope)
    traced = Pipeline(hc_hybrid, trace_path=path).ask(QUESTION, where=where, scope=scope)
    assert traced.answer == plain.answer
    (line,) = read_traces(path)
    assert line.answer == plain.answer and line.trace[1].detail["scope"] == {
        "access": ["customer", "public"]}
    cp = CachedPipeline(Pipeline(hc_hybrid), path=tmp_path / "a.sqlite")
    first = cp.ask(QUESTION, where=where, scope=scope)
    second = cp.ask(QUESTION, where=where, scope={"access": {"customer", "public"}})
    assert first.answer == second.answer == plain.answer and cp.cache.hits == 1


def _docs():
    from ragbook.types import Document

    return [Document("pub1", "refund window for plans", metadata={"tags": ("a", "b")}),
            Document("pub2", "office hours on sundays", metadata={"tags": ("c",)})]


def test_two_functions_with_one_name_are_two_settings_for_the_cache(tmp_path):
    """A tokenizer from one factory with other stopwords computes other hits: fingerprinted
    by its qualified name alone, the cache served one's results for the other."""
    from ragbook import BM25Index

    def tokenizer(stop):
        def tok(text):
            return [w for w in text.lower().split() if w not in stop]
        return tok

    path = tmp_path / "r.sqlite"
    a = BM25Index(tokenizer=tokenizer(set())).build(_docs())
    b = BM25Index(tokenizer=tokenizer({"refund", "window"})).build(_docs())
    assert a.fingerprint != b.fingerprint
    assert a.fingerprint == BM25Index(tokenizer=tokenizer(set())).build(_docs()).fingerprint
    CachedRetriever(a, path=path).search("refund window", k=2)
    assert [h.id for h in CachedRetriever(b, path=path).search("refund window", k=2)] == \
        [h.id for h in b.search("refund window", k=2)]
    from ragbook.component import identity_of
    assert identity_of({1}) != identity_of({"1"}) and identity_of({1: 0}) != identity_of({"1": 0})


def test_a_cached_hit_is_the_hit_and_a_damaged_row_is_recomputed(tmp_path):
    import sqlite3

    from ragbook import BM25Index

    index = BM25Index().build(_docs())
    cached = CachedRetriever(index, path=tmp_path / "r.sqlite")
    first = cached.search("refund window", k=2)
    again = cached.search("refund window", k=2)
    assert again == first and again[0].metadata["tags"] == ("a", "b")     # tuples stay tuples
    for damage in ('"garbage"', "[]", '{"hits": [{"id": 1}]}'):
        with sqlite3.connect(tmp_path / "r.sqlite") as db:
            db.execute("UPDATE entry SET value = ?", (damage,))
        assert cached.search("refund window", k=2) == first, damage


def test_an_uncreatable_cache_folder_warns_and_runs_uncached(tmp_path, monkeypatch, hc_hybrid):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("RAGBOOK_CACHE", str(blocker / "sub"))
    from ragbook import BM25Index

    with pytest.warns(UserWarning, match="cache.*failed.*RAGBOOK_CACHE"):
        cached = CachedRetriever(BM25Index().build(_docs()))
    assert [h.id for h in cached.search("refund window", k=1)] == ["pub1"]
    with pytest.warns(UserWarning, match="cache.*failed"):
        answers = CachedPipeline(Pipeline(hc_hybrid))
    assert answers.ask("How long is the refund window?").question
