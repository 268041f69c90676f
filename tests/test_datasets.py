"""The data everything is measured on: counts, schema, labels that resolve, splits that do
not leak, spans that are verbatim, and the deliberate traps still in place."""
import re

import pytest

from ragbook.datasets import (
    CATEGORIES,
    generate_tickets,
    load_helpcentre,
    load_pydocs,
    load_reader_set,
)

DEPARTMENTS = {"billing", "account", "technical", "api", "integrations", "security",
               "hardware", "community"}


@pytest.fixture(scope="module")
def py():
    return load_pydocs()


def test_help_centre_articles_and_metadata(hc):
    assert len(hc.documents) >= 120
    assert len({d.id for d in hc.documents}) == len(hc.documents)
    for d in hc.documents:
        m = d.metadata
        assert m["department"] in DEPARTMENTS, d.id
        assert m["status"] in {"current", "superseded"}, d.id
        assert m["access"] in {"public", "customer", "internal"}, d.id
        assert m["plan"] in {"all", "free", "starter", "pro", "enterprise"}, d.id
        assert re.fullmatch(r"20(2[3-6])-\d\d-\d\d", m["updated"]), d.id
        assert d.title and d.text.startswith("# "), d.id
        for key in ("supersedes", "superseded_by"):
            if key in m:
                hc.doc(m[key])


def test_superseded_pages_point_to_their_replacement(hc):
    old = [d for d in hc.documents if d.metadata["status"] == "superseded"]
    assert {d.id for d in old} >= {"billing-refund-policy-2024", "api-rate-limits-2024",
                                   "security-sso-setup-legacy"}
    for d in old:
        new = hc.doc(d.metadata["superseded_by"])
        assert new.metadata["status"] == "current" and new.metadata.get("supersedes") == d.id


def test_questions_schema(hc):
    qs = hc.questions
    assert len(qs) >= 250
    assert len({q.id for q in qs}) == len(qs)
    assert len({q.text.strip().lower() for q in qs}) == len(qs), "duplicate question texts"
    for q in qs:
        assert q.category in CATEGORIES, q.id
        assert q.split in {"train", "dev", "test"}, q.id
        for g in q.gold:
            hc.doc(g)
        if q.category == "unanswerable":
            assert not q.gold and not q.answers, q.id
        else:
            assert q.gold and q.answers, q.id
        for a in q.answers:
            assert a["doc"] in q.gold and a["text"] in hc.doc(a["doc"]).text, q.id
        if q.category == "follow_up":
            assert q.turns and q.condensed, q.id
        if q.category == "superseded_trap":
            assert hc.doc(q.extra["trap"]).metadata["status"] == "superseded", q.id
        if q.category == "plausible_neighbour":
            assert q.extra["neighbour"] not in q.gold, q.id
            hc.doc(q.extra["neighbour"])
        if q.category == "conflict":
            assert len(q.gold) == 2, q.id


def test_splits_are_disjoint_and_test_is_large(hc):
    counts = hc.splits()
    assert set(counts) == {"train", "dev", "test"}
    assert counts["test"] / sum(counts.values()) >= 0.40
    ids = {s: {q.id for q in hc.split(s)} for s in counts}
    assert not (ids["train"] & ids["dev"] or ids["train"] & ids["test"] or ids["dev"] & ids["test"])
    assert {q.category for q in hc.split("test")} == set(CATEGORIES)


def test_qrels_shape(hc):
    qrels = hc.qrels("dev")
    assert qrels and all(isinstance(v, dict) and set(v.values()) == {1} for v in qrels.values())
    assert not any(q.id in qrels for q in hc.split("dev", ["unanswerable"]))


def test_error_codes_are_explained_on_exactly_one_page(hc):
    codes = ["ERR_CONN_4021", "ERR_CONN_4022", "ERR_AUTH_TOKEN_EXPIRED",
             "ERR_SSO_ASSERTION_INVALID", "WEBHOOK_SIGNATURE_MISMATCH", "EXPORT_QUOTA_REACHED",
             "SEAT_LIMIT_REACHED", "PAYMENT_DECLINED_3DS", "ERR_SYNC_1108", "IMPORT_ROW_INVALID"]
    for code in codes:
        pages = [d.id for d in hc.documents if code in d.text]
        assert len(pages) == 1, (code, pages)
    assert {d.id for d in hc.documents if "RATE_LIMIT_EXCEEDED" in d.text} == {
        "api-rate-limits", "api-rate-limits-2024"}


def test_curriculum_situations_are_present(hc):
    refund = hc.doc("billing-refund-policy").text
    assert ("Enterprise annual contracts carry a 14-day refund window measured from the "
            "invoice date.") in refund
    console = hc.doc("technical-console-fails-to-render").text.lower()
    assert not re.search(r"dashboard|stuck|load", console)
    assert "ignore previous instructions" in hc.doc("community-export-tips").text.lower()
    assert len(hc.doc("hardware-hub-orders-billing-returns").text.split()) >= 1_100
    failed = hc.doc("billing-failed-payments").text
    assert "depends on your plan:\n\nStarter and Pro workspaces get 7 days" in failed
    assert "90 days" in hc.doc("account-free-plan-overview").text
    assert "30 days" in hc.doc("account-data-retention").text


def test_without_superseded():
    current = load_helpcentre(include_superseded=False)
    assert all(d.metadata["status"] == "current" for d in current.documents)


def test_pydocs_sections_and_faq_labels(py):
    assert len(py.documents) >= 4_000
    assert len({d.id for d in py.documents}) == len(py.documents)
    assert all(d.text.strip() for d in py.documents)
    assert py.splits() == {"train": 85, "test": 90}
    for q in py.questions:
        (gold,) = q.gold
        doc = py.doc(gold)
        assert doc.metadata["file"].startswith("faq/") and doc.title == q.text
        assert q.text not in doc.text, "the FAQ heading (the question) must not be indexed"
        for a in q.answers:
            assert a["text"] in doc.text
    assert sum(bool(q.answers) for q in py.questions) >= 150


@pytest.mark.parametrize("name", ["helpcentre", "pydocs"])
def test_reader_sets_spans_verbatim(name):
    total = impossible = 0
    seen = {}
    for split in ("train", "dev", "test"):
        for ex in load_reader_set(name, split):
            total += 1
            impossible += ex.is_impossible
            assert ex.is_impossible == (not ex.answers)
            for text, start in ex.answers:
                assert ex.context[start:start + len(text)] == text, ex.id
            base = ex.id.rsplit("-", 1)[0]
            assert seen.setdefault(base, split) == split, f"{base} is in two splits"
    assert total >= 150 and impossible / total >= 0.30


def test_reader_sets_together_are_large_enough():
    all_ = [ex for s in ("train", "dev", "test") for ex in load_reader_set("all", s)]
    assert len(all_) >= 400
    assert sum(ex.is_impossible for ex in all_) / len(all_) >= 0.30


def test_reader_set_bad_names():
    with pytest.raises(ValueError, match="unknown reader set"):
        load_reader_set("squad", "train")
    with pytest.raises(ValueError, match="unknown split"):
        load_reader_set("pydocs", "validation")


def test_ticket_generator_is_deterministic_and_grounded(hc):
    a, b = generate_tickets(300, seed=1), generate_tickets(300, seed=1)
    assert [t.text for t in a] == [t.text for t in b]
    assert [t.text for t in a] != [t.text for t in generate_tickets(300, seed=2)]
    assert len({t.id for t in a}) == 300
    for t in a:
        assert hc.doc(t.metadata["resolved_by"]).metadata["status"] == "current"


@pytest.mark.slow
def test_tickets_average_about_800_tokens():
    from ragbook.chunking import count_tokens

    tickets = generate_tickets(200, seed=0)
    mean = sum(count_tokens(t.text) for t in tickets) / len(tickets)
    assert 700 <= mean <= 900, mean


def test_split_lookup_errors(hc):
    with pytest.raises(ValueError, match="has no split 'validation'"):
        hc.split("validation")
    with pytest.raises(KeyError, match="no document"):
        hc.doc("nope")
