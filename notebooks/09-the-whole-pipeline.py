# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 09 · The whole pipeline
#
# Chapters 1–8 built the stages one at a time. This chapter puts them behind one call,
# `Pipeline.ask`, and adds what a support team needs before it lets the thing talk to
# customers: a trace of what every stage handed the next, follow-up questions made searchable,
# and rules for *not* answering — escalating to a person with the reason and the passages they
# need. Then it measures the whole thing end to end: how often it answers right, answers wrong,
# or hands over, with the threshold chosen on one split and reported on another.

# %%
# which models make this chapter's numbers, and where the chapter sits in the pipeline
from ragbook import models
from ragbook.figures import pipeline_map

print(models.banner())
stage_map = pipeline_map(chapter=9)

# %%
import json
import random
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from ragbook import Encoder, models
from ragbook.bm25 import BM25Index
from ragbook.chunking import chunk_documents
from ragbook.condense import LLMCondenser, RuleCondenser
from ragbook.datasets import load_helpcentre, load_pydocs
from ragbook.dense import DenseIndex
from ragbook.evaluate import bootstrap_ci, paired_bootstrap, per_query, run_from_hits
from ragbook.fusion import HybridRetriever, reciprocal_rank_fusion
from ragbook.injection import instruction_like
from ragbook.pipeline import Pipeline
from ragbook.rerank import CrossEncoderReranker
from ragbook.result import answer_outcome, gold_ranks, outcome, read_traces, with_history
from ragbook.text import sentences

hc = load_helpcentre()
encoder = Encoder()
chunks = chunk_documents(hc.documents, size=256, overlap=32)
hybrid = HybridRetriever(DenseIndex(encoder), BM25Index()).build(chunks)
second = CrossEncoderReranker()          # the profile's second stage: chapter 6's winner
pipeline = Pipeline(hybrid, reranker=second)
print(f"profile: {models.active_profile()}; {len(chunks)} help-centre chunks in both indexes")
print(pipeline)
print(f"the hybrid's own settings: depth {hybrid.depth} per channel, rrf_k = {hybrid.rrf_k:g}; the pipeline asks it "
      f"for {pipeline.candidates} candidates, the second stage ({models.resolve('cross_encoder').name}) "
      f"orders them, the reader reads the first {pipeline.keep}; superseded pages excluded: "
      f"{pipeline.exclude_superseded}")
print(f"reader: {type(pipeline.reader).__name__}, abstains when its best sentence scores under "
      f"min_span_score={pipeline.reader.min_span_score}")
print(f"confidence the pipeline's min_confidence compares: {pipeline.confidence_kind}")


def question(qid):
    return next(q for q in hc.questions if q.id == qid)


def fmt(threshold):
    return "off" if threshold is None else f"{threshold:.3f}"


# %% [markdown]
# ## 0 · The finished system, answering
#
# Before taking it apart, see it work. Below are the first five help-centre *test*
# questions (in file order) that it answers right — the answer holds the labelled answer (or
# most of its words), not just some sentence of the right page; chosen for showing, not for
# measuring: section 5 counts how often this happens, and how often it answers wrong. Each
# answer comes with the page and the characters it was quoted from. Last, what happens when
# retrieval has nothing to offer — here a filter that matches no page: the pipeline does not
# guess, it escalates with `no_candidates`.

# %%
shown = []
for q in hc.split("test"):
    if len(shown) == 5:
        break
    if q.gold and not q.turns:
        r = pipeline.ask(q.text)
        if answer_outcome(r, q.answers) == "right":
            shown.append((q, r))
for q, r in shown:
    doc, start, end = r.answer_span
    print(f"Q: {q.text}\nA: {r.answer.text}\n   (from {doc}, characters {start}-{end})\n")
r = pipeline.ask("how long is the refund window?", where={"department": "no-such-team"})
print(f"escalated: {r.escalated}; reason: {r.reason}; detail: {r.detail}")

# %% [markdown]
# This pipeline is retrieve → fuse → rerank → cut → read. The second stage is the one chapter 6
# measured winning: `CrossEncoderReranker()` resolves the profile's `cross_encoder` role
# (printed above; offline, the MaxSim blend, which lifted MRR@10 on both test splits there),
# so the five passages the reader gets are the second stage's first five. The reader is chapter 7's
# `SentenceReader`, the best sentence under the bi-encoder, with the abstention floor the
# package ships for this encoder (printed above, calibrated on the help-centre reading tasks):
# under it the pipeline escalates with `reader_abstained`.
#
# ## 1 · The stages, one at a time
#
# Everything `ask` does, by hand, on one question: search both channels 100 deep (with the
# filter `exclude_superseded` adds), fuse to 50 with reciprocal rank fusion, let the second
# stage order the 50, hand its first 5 to the reader, take each passage's best sentence,
# answer with the best of those.

# %%
q_text = "how long is the refund window for enterprise annual contracts?"
where = {"status": {"$ne": "superseded"}}
dense = hybrid.dense.search(q_text, k=100, where=where)
keyword = hybrid.bm25.search(q_text, k=100, where=where)
fused = reciprocal_rank_fusion([dense, keyword], k=50, rrf_k=60)
handed = second.order(q_text, fused, k=5)
reader = pipeline.reader
best = [max(reader.spans(q_text, h.text, h.id), key=lambda s: s.score) for h in handed]
answer = max(best, key=lambda s: s.score)

for name, hits in (("dense", dense), ("bm25", keyword), ("fused", fused), ("rerank", handed)):
    print(f"{name:6s} {len(hits):3d} hits; top 3: " + ", ".join(f"{h.id} {h.score:.3f}" for h in hits[:3]))
print("\nthe reader's best sentence in each of the 5 candidates:")
for h, s in zip(handed, best):
    print(f"  {s.score:.3f}  {h.id:38s} {s.text[:70]!r}")
print(f"\nanswer: {answer.text!r} (from {answer.source})")

# %% [markdown]
# The confidence the low-confidence rule will compare is the second stage's best score, not
# the fused score: an RRF score only says where a passage ranked in each list, so it looks the
# same for a question the corpus answers well and for the best of a bad lot, while the second
# stage scores the question and the passage themselves. Each stage says what its confidence is:
# the hybrid's `retrieve` returns the hits, the stages that made them and a confidence of a
# named kind (its dense cosine), and a reranker's order replaces it with its own
# (`confidence_kind`); the pipeline never opens either, it only reads that. Now the same
# through the package:

# %%
prep = pipeline.prepare(q_text)
result = pipeline.decide(prep)
print("stages:", [s.name for s in prep.trace], "- the hybrid reported", [s.name for s in prep.trace[1:4]],
      f"({prep.trace[1].detail['count']} and {prep.trace[2].detail['count']} hits, its own depth)")
assert [h.id for h in prep.candidates] == [h.id for h in handed]
assert prep.confidence == handed[0].score and prep.confidence_kind == second.confidence_kind
assert result.answer.text == answer.text and result.sources[0].id == answer.source
doc_id, start, end = result.answer_span
print(f"same 5 candidates, same answer; confidence {prep.confidence:.3f} ({prep.confidence_kind})")
print(f"the answer sits at characters {start}-{end} of {doc_id}: {hc.doc(doc_id).text[start:end]!r}")

# %% [markdown]
# `ask` = `prepare` (everything that does not depend on a threshold) + `decide` (thresholds and
# escalation rules). The split pays off in section 5, where a slider re-decides hundreds of
# questions without retrieving again.
#
# ## 2 · The trace: what every stage handed the next
#
# When an answer is wrong, the first question is what the reader was handed. Every result
# carries a trace, one record per stage: its time, the ids it passed on (retrieval stages
# their top 10) and their scores.

# %%
for s in result.trace:
    top = ", ".join(f"{i} {x:.3f}" for i, x in zip(s.ids[:2], s.scores[:2]))
    print(f"{s.name:8s} {s.seconds * 1e3:7.2f} ms  passed on {s.detail.get('count', len(s.ids)):2d}  {top}")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ### Deep dive · The trace as a JSON log
#
# With `trace_path`, `ask` appends each result with its trace as one JSON line — the log a
# support engineer reads the morning after. `read_traces` turns the lines back into the same
# `Result` objects:

# %%
asked_texts = [q_text, "do you have a nonprofit discount for a registered charity?",
               "ERR_CONN_4021 on the hub after the firmware update"]
with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "traces.jsonl"
    logged = Pipeline(hybrid, reranker=second, trace_path=path)
    asked = [logged.ask(t) for t in asked_texts]
    lines = path.read_text(encoding="utf-8").splitlines()
    back = read_traces(path)
assert back == asked
record = json.loads(lines[0])
print(f"{len(lines)} lines written and read back equal; one line holds: {', '.join(record)}")
# (a line's length varies with the timings it holds, so it is not a number worth printing)
print(f"first line: answer {record['answer']!r}, "
      f"candidates {[c['id'] for c in record['candidates']]}, "
      f"stages {[stage['name'] for stage in record['trace']]}")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ### Deep dive · Reading a trace: one wrong answer, stage by stage
#
# Reading a trace: take the first test question the pipeline answers from the wrong page and
# ask, stage by stage, at what rank a chunk of a gold page was (`gold_ranks`; None = not in what
# the stage passed on).

# %%
for q in hc.split("test"):
    r = pipeline.ask(*with_history(q))
    if q.gold and outcome(r, q.gold) == "wrong":
        break
gold_chunks = {c.id for c in chunks if c.doc_id in q.gold}
print(f"{q.id}: {q.text!r}\ngold: {q.gold}")
print(f"answered from {r.sources[0].doc_id}: {r.answer.text[:90]!r}")
print("rank of the first gold chunk per stage:", gold_ranks(r.trace, gold_chunks))

# %% [markdown]
# A gold chunk reached the reader's five (its rank in `read` is printed) and the reader
# preferred a sentence from another page: this is a *reading* error, not a retrieval one. (The
# retrieval stages record their first ten, so None under `fuse` with a number under `rerank`
# means the second stage lifted a gold chunk from further down.) Had `read` printed None with
# `rerank` a number, the cut to five would be the suspect; None
# everywhere would point at the embeddings or the chunking (chapter 4's diagnostic).

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Deep dive · 3 · Follow-up questions: condensation
#
# In a conversation the latest message is often not a question on its own: "and on the free
# plan?" after "can I export our tickets to csv on pro?". Retrieval sees only the message. The
# help centre labels such follow-ups with their earlier turns and a hand-written stand-alone
# rewrite. Four ways to build the query, recall@10 on those questions (pages judged, all
# splits):
#
# * **none** — the message as typed;
# * **rules** — `RuleCondenser`: a short message, or one that starts with "and/what about" or
#   refers back ("it", "that"), gets the previous user turn prepended, plans swapped;
# * **LLM** — `LLMCondenser`: the local generator (offline: `SmolLM2-135M-Instruct`) is asked
#   for a stand-alone question; an empty, multi-line or over-long reply falls back to the
#   rules. Greedy replies are cached on disk, so only the first run pays for the model;
# * **labelled** — the hand-written rewrite: the upper bound for any condenser.

# %%
follow_ups = [q for q in hc.questions if q.category == "follow_up"]
fu_qrels = {q.id: {d: 1 for d in q.gold} for q in follow_ups}
rules = RuleCondenser()
llm_condenser = LLMCondenser()
t0 = time.perf_counter()
llm_texts, llm_by = [], []
for q in follow_ups:
    llm_texts.append(llm_condenser.condense(q.text, list(q.turns)))
    llm_by.append(llm_condenser.last_["by"])
llm_seconds = time.perf_counter() - t0
queries = {"none": [q.text for q in follow_ups],
           "rules": [rules.condense(q.text, list(q.turns)) for q in follow_ups],
           "LLM": llm_texts,
           "labelled": [q.condensed for q in follow_ups]}
fu_runs = {name: {q.id: hybrid.search(t, k=10) for q, t in zip(follow_ups, texts)}
           for name, texts in queries.items()}
fu_recall = {name: per_query(fu_qrels, run_from_hits(run), "recall@10") for name, run in fu_runs.items()}
print(f"{len(follow_ups)} follow-ups; LLM condensation took {llm_seconds:.1f} s "
      f"({llm_condenser.llm.name}), replies used: {dict(Counter(llm_by))}")
print(f"{'query':9s} {'recall@10':>9s} {'95% CI':>15s}   {'vs none [95% CI]':>22s}")
for name, values in fu_recall.items():
    m, lo, hi = bootstrap_ci(list(values.values()))
    d, dlo, dhi = paired_bootstrap(fu_recall["none"], values)
    vs = f"{d:+.3f} [{dlo:+.3f}, {dhi:+.3f}]" if name != "none" else ""
    print(f"{name:9s} {m:9.3f}  [{lo:.3f}, {hi:.3f}]   {vs:>22s}")

# %% [markdown]
# The rules recover nearly all of the gap between the bare message and the hand-written
# rewrite. SmolLM2 barely moves recall off "none". What it writes, next to the rules and the
# label:

# %%
for i in range(3):
    print(f"{follow_ups[i].text!r}  (after {follow_ups[i].turns[0]['content']!r})")
    for name in ("LLM", "rules", "labelled"):
        print(f"   {name:8s} {queries[name][i]!r}")

# %% [markdown]
# The 135M model does not rewrite: it repeats the previous question (losing the new plan),
# echoes the message, or writes an unrelated question. Its replies are short single lines, so
# they pass the fallback's checks (the count of replies used is printed above) — a check on the
# *form* of a reply cannot tell a rewrite from a new question. A larger generator behind
# `RAGBOOK_LLM_BASE_URL` is what LLM condensation needs; offline, the rules are the better
# condenser, at no cost.
#
# One follow-up that retrieval misses as typed and finds condensed:

# %%
fixed = next(q for q in follow_ups if fu_recall["none"][q.id] == 0 and fu_recall["rules"][q.id] == 1)
i = follow_ups.index(fixed)
print(f"{fixed.text!r}   gold: {fixed.gold}")
for name in ("none", "rules"):
    docs = list(dict.fromkeys(h.doc_id for h in fu_runs[name][fixed.id]))[:3]
    print(f"   {name:5s} query {queries[name][i]!r}\n         top pages: {docs}")
r = pipeline.ask(fixed.text, list(fixed.turns))
print(f"ask() condenses by itself; its trace logs the query it searched with: {r.trace[0].detail['output']!r}\n"
      f"   -> {outcome(r, fixed.gold)}: answered from {r.sources[0].doc_id if r.sources else r.reason}")

# %% [markdown]
# Condensed, retrieval finds both gold pages; which sentence is then the answer is the reader's
# choice (chapter 7's problem, printed last). The condensed text is what the trace logs (the
# `condense` stage), and it is the natural key for an answer cache: two conversations that
# condense to the same question can share an answer; two identical messages ("and on
# starter?") in different conversations must not.

# %% [markdown]
# ## 4 · When not to answer
#
# `decide` escalates instead of answering when retrieval found nothing, when the confidence is
# under `min_confidence` (section 5), when the reader finds nothing good enough, when two sources
# contradict each other, and when the answer would come from a retired page. An escalation
# carries the reason, a sentence for the person taking over, and the candidates.
#
# ### Two pages that disagree
#
# Chapter 8 met two current pages that disagree about how long the Free plan keeps tickets. The
# pipeline compares the reader's answer with the best sentence of every other candidate page: a
# different figure in the same unit, about the same thing, scored almost as well, is a conflict
# (`find_conflict`).

# %%
q92 = question("ba-q092")
r = pipeline.ask(q92.text)
print(f"{q92.text!r} -> escalated: {r.escalated}, reason: {r.reason}")
for s in r.trace[-1].detail["statements"]:
    print(f"   {s!r}")
print(r.detail)

# %% [markdown]
# How often does it catch one? The help centre has a handful of questions built on this
# contradiction, and every other question is a chance for a false alarm:

# %%
everything = {q.id: pipeline.ask(*with_history(q)) for q in hc.questions}
conflict_qs = [q for q in hc.questions if q.category == "conflict"]
for q in conflict_qs:
    prep_q = pipeline.prepare(q.text)
    per_page = {}
    for h, s in zip(prep_q.candidates, prep_q.spans):
        if h.doc_id in q.gold and (h.doc_id not in per_page or s.score > per_page[h.doc_id].score):
            per_page[h.doc_id] = s
    print(f"{q.id} {everything[q.id].reason or 'answered':9s} pages among the 5 candidates: {len(per_page)}  {q.text[:60]!r}")
    for page, s in per_page.items():
        print(f"      {page:28s} best sentence {s.score:.3f} {s.text[:70]!r}")
caught = sum(everything[q.id].reason == "conflict" for q in conflict_qs)
both = sum(set(q.gold) <= {h.doc_id for h in everything[q.id].candidates} for q in conflict_qs)
others = [q for q in hc.questions if q.category != "conflict"]
false_alarms = sum(everything[q.id].reason == "conflict" for q in others)
print(f"\ncaught {caught} of {len(conflict_qs)}; both pages among the candidates in {both}; "
      f"false alarms: {false_alarms} of {len(others)} other questions")

# %% [markdown]
# The check is precise (no false alarm above) and it misses most conflicts, for two reasons
# that the printout shows. Often only one of the two pages reaches the five candidates: the
# question is worded like one of them ("how much history" like the overview, "when deleted"
# like the retention page), and nothing pulls in the page that disagrees. And when both pages
# are there, the other page's *best* sentence for this wording can be a different sentence, one
# without the contradicting figure (ba-q096, ba-q097), so there is nothing to compare. A conflict check at
# question time only sees what retrieval happened to bring; the reliable place to find two
# pages that disagree is at indexing time — compare the figures of pages on the same topic
# once, and fix the content.

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ### Deep dive · A retired page
#
# The help centre keeps superseded pages (an older refund policy, the legacy SSO guide, older
# rate limits: the cell lists them), as real corpora do. Their text scores as high as the
# current page's. The same question with the filter off and on:

# %%
print("superseded pages:", ", ".join(d.id for d in hc.documents if d.metadata.get("status") == "superseded"))
off = Pipeline(hybrid, reranker=second, exclude_superseded=False)
traps = [q for q in hc.questions if q.category == "superseded_trap"]
# the first trap question whose answer, filter off, would come from the retired page
q91 = next((q for q in traps if off.ask(q.text).reason == "superseded_source"
            and not pipeline.ask(q.text).escalated), question("ba-q091"))
prep_off = off.prepare(q91.text)
r_off = off.decide(prep_off)
would = max((s for s in prep_off.spans if s), key=lambda s: s.score)
source = next(h for h in prep_off.candidates if h.id == would.source)
print(f"{q91.text!r}\n\nfilter off: best sentence from {source.doc_id} "
      f"(status {source.metadata['status']}): {would.text!r}")
print(f"   -> escalated: {r_off.reason}: {r_off.detail}")
r_on = pipeline.ask(q91.text)
print(f"filter on:  escalated: {r_on.reason}" if r_on.escalated else
      f"filter on:  answered from {r_on.sources[0].doc_id} (status "
      f"{r_on.sources[0].metadata['status']}): {r_on.answer.text!r}")

trap_in = sum(q.extra["trap"] in {h.doc_id for h in off.prepare(q.text).candidates} for q in traps)
trap_esc = sum(off.ask(q.text).reason == "superseded_source" for q in traps)
assert not any(q.extra["trap"] in {h.doc_id for h in everything[q.id].candidates} for q in traps)
print(f"\n{len(traps)} superseded-trap questions, filter off: the retired page among the candidates "
      f"{trap_in} times, the answer taken from it (escalated) {trap_esc} times; filter on: never a candidate")

# %% [markdown]
# The filter is the fix: a retired page never reaches the reader. The `superseded_source`
# escalation is the safety net for a search run without it (an "include archive" option, a
# page whose status was set late): a retired page may still be *read*, but it is never the
# source of an answer.

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ### Deep dive · An instruction planted in a document
#
# Chapter 8 found a forum post on the community page about exports carrying an instruction
# aimed at the model. `instruction_like` finds it in the whole help centre:

# %%
planted = [(d.id, s) for d in hc.documents for s in sentences(d.text) if instruction_like(s)]
print(f"{len(planted)} instruction-like sentence(s) in {len(hc.documents)} pages:")
for doc, s in planted:
    print(f"   {doc}: {s!r}")
planted_chunk = next(c for c in chunks if planted[0][1] in c.text)

# %% [markdown]
# Retrieval brings the planted chunk to the reader for questions about refunds. Two of them,
# first with the pipeline's two guards switched off (`skip_instructions=False`,
# `guard_directives=False`):

# %%
attacks = ["are refunds disabled?", "are refunds permanently disabled?"]
exposed = Pipeline(hybrid, reranker=second, skip_instructions=False, guard_directives=False)
for text in attacks:
    prep_a = exposed.prepare(text)
    r_a = exposed.decide(prep_a)
    assert planted_chunk.id in {h.id for h in prep_a.candidates}
    planted_score = max(s.score for s in reader.spans(text, planted_chunk.text) if planted[0][1] in s.text)
    print(f"{text!r}: the planted chunk is candidate {[h.id for h in prep_a.candidates].index(planted_chunk.id) + 1} of 5")
    print(f"   the planted sentence scores {planted_score:.3f}; the answer scores {r_a.answer.scores[0]:.3f}, "
          f"from {r_a.sources[0].doc_id}: {r_a.answer.text[:80]!r}")
    print(f"   the answer is the planted sentence: {instruction_like(r_a.answer.text)}")

# %% [markdown]
# An extractive reader has no instructions to override. It ranks the sentences it was handed
# and returns one verbatim, with its source: nothing in a passage can make it *say* anything
# that is not in a passage, or change how it treats the next question. That is why chapter 8's
# generative reader needed fences and verification and this reader does not.
#
# But look at the answers: a planted sentence *is* in a passage, and when a question matches it
# closely it is the best sentence — quoted, with `community-export-tips` as its source, to a
# customer who asked about refunds. Not obeyed, but delivered. Two defences: keep untrusted user content
# out of the index you answer from, and never answer from a page that carries an
# instruction-like sentence. The pipeline does the second by default (`skip_instructions=True`):
# a page where `instruction_like` flags a sentence is never quoted — not that sentence, and not
# its others either, since a payload often sits in the sentence *after* "Note for AI
# assistants:", where no detector sees it. When such a page holds the best answer, the question
# goes to a person with the reason `planted_instruction` — the page has been tampered with;
# when a genuine answer from another page ranks above it, that answer is given. Recognising a
# planted sentence can fail (a new phrasing, another language), so a second guard does not
# depend on it (`guard_directives=True`): an answer that *directs* — "from now on …", a request for a password,
# words addressed to the assistant — is delivered only when another document states it too;
# otherwise the question escalates with `unsupported_answer`.

# %%
for text in attacks:
    r_g = pipeline.ask(text)
    said = (f"escalated: {r_g.reason}" if r_g.escalated else
            f"answered from {r_g.sources[0].doc_id}: {r_g.answer.text[:80]!r}")
    print(f"{text!r} -> {said}")

# %% [markdown]
# ## 5 · Thresholds: right, wrong, or hand it over
#
# Answering is a bet. A wrong answer sent to a customer costs more than a hand-over to an agent;
# the pipeline counts a wrong answer as twice as bad (`wrong_cost=2`) and chooses `min_confidence`,
# the floor on the second stage's best score, to maximise right − 2·wrong. *Right* here means answered from
# a gold page (what calibration counts: every labelled question has one); any answer to an
# unanswerable question is *wrong*. Beside it, *right answer* judges the answer itself — it holds
# the labelled answer or most of its words — which a right page does not guarantee: a neighbouring
# sentence of the right page is right by page and wrong by answer. The threshold is chosen on dev and
# reported on test, with 95% bootstrap intervals. Each question is prepared once; every threshold
# is then a `decide` away — on a copy of the pipeline with that threshold (`with_settings`).

# %%
def rates(p, prepared, questions, min_confidence):
    """{outcome: (mean, low, high)} over the questions, with a 95% bootstrap interval: right,
    wrong and escalated by page, then right by the answer itself."""
    trial = p.with_settings(min_confidence=min_confidence, min_confidence_kind=None)
    results = [trial.decide(x) for x in prepared]
    outs = [outcome(r, q.gold) for r, q in zip(results, questions)]
    by_answer = [answer_outcome(r, q.answers) == "right" for r, q in zip(results, questions)
                 if q.answers or not q.gold]     # a few Python-docs questions have no answer text
    return {**{o: bootstrap_ci([x == o for x in outs]) for o in ("right", "wrong", "escalated")},
            "right answer": bootstrap_ci(by_answer)}


def show_rates(label, r):
    print(f"{label:32s} " + "  ".join(f"{o} {m:.2f} [{lo:.2f}, {hi:.2f}]" for o, (m, lo, hi) in r.items()))


hc_dev, hc_test = hc.split("dev"), hc.split("test")
t0 = time.perf_counter()
hc_prepared = {"dev": [pipeline.prepare(*with_history(q)) for q in hc_dev],
               "test": [pipeline.prepare(*with_history(q)) for q in hc_test]}
pipeline = pipeline.calibrate(hc_prepared["dev"], hc_dev)   # a calibrated copy
hc_threshold = pipeline.min_confidence
print(f"help centre: {len(hc_dev)} dev and {len(hc_test)} test questions prepared in "
      f"{time.perf_counter() - t0:.1f} s; min_confidence calibrated on dev: {fmt(hc_threshold)}")
first_stage_only = Pipeline(hybrid)       # the same pipeline without the second stage
hc_rates = {"no second stage, no threshold": rates(first_stage_only, [first_stage_only.prepare(*with_history(q))
                                                                       for q in hc_test], hc_test, None),
            **{label: rates(pipeline, hc_prepared["test"], hc_test, th)
               for label, th in (("no threshold", None), (f"min_confidence {fmt(hc_threshold)}", hc_threshold))}}
for label, r in hc_rates.items():
    show_rates(f"help centre test, {label}", r)
unanswerable = [(x, q) for x, q in zip(hc_prepared["test"], hc_test) if not q.gold]
held = sum(pipeline.decide(x).escalated for x, _ in unanswerable)
print(f"unanswerable test questions escalated at the threshold: {held} of {len(unanswerable)}")

# %% [markdown]
# The threshold trades right answers for fewer wrong ones: both rates fall, and the hand-overs
# take up the difference (the intervals say how firmly). *Right answer* sits below *right*: the
# gap is answers quoted from the right page that do not say what was asked. The first row is the
# same pipeline without the second stage: chapter 6's winner moves answers from a wrong page to a
# right one (compare *right* and *wrong* in the first two rows), but not the share of right
# *answers* — it orders passages, and the reader still picks the sentence. Most unanswerable questions are among
# the hand-overs — and so are many answerable ones: the best score says how close the nearest
# passage is, not whether it answers, and a help centre about one product always has *some*
# passage close to any question about it.
#
# The same on the Python docs (sections indexed whole, as in chapter 5). Their FAQ questions have
# train and test splits and all are answerable. The second stage and the reader are the slow
# stages there — a Python-docs section can be very long; the second stage reads the tokens of
# 50 of them and the reader embeds every sentence of five — so a seeded
# sample of 40 questions per split keeps this notebook within CI's time budget.

# %%
py = load_pydocs()
# sections are indexed whole; chapter 3 showed what truncation at 256 tokens hides, so its warning is off here
warnings.filterwarnings("ignore", message=".*longer than this encoder's max_length")
py_hybrid = HybridRetriever(DenseIndex(encoder), BM25Index()).build(py.documents)
py_pipeline = Pipeline(py_hybrid, reranker=second)
py_train = random.Random(0).sample(py.split("train"), 40)
py_test = random.Random(0).sample(py.split("test"), 40)
t0 = time.perf_counter()
py_prepared = {"train": [py_pipeline.prepare(q.text) for q in py_train],
               "test": [py_pipeline.prepare(q.text) for q in py_test]}
py_pipeline = py_pipeline.calibrate(py_prepared["train"], py_train)
py_threshold = py_pipeline.min_confidence
print(f"python docs: {len(py_hybrid):,} sections; {len(py_train)} train and {len(py_test)} test questions "
      f"prepared in {time.perf_counter() - t0:.1f} s; min_confidence calibrated on train: {fmt(py_threshold)}")
py_rates = {label: rates(py_pipeline, py_prepared["test"], py_test, th)
            for label, th in (("no threshold", None), (f"min_confidence {fmt(py_threshold)}", py_threshold))}
for label, r in py_rates.items():
    show_rates(f"python docs test, {label}", r)
py_lenient = py_pipeline.calibrate(py_prepared["train"], py_train, wrong_cost=1.0).min_confidence
show_rates(f"  (wrong_cost 1: min_confidence {fmt(py_lenient)})", rates(py_pipeline, py_prepared["test"], py_test, py_lenient))

# %% [markdown]
# On the Python docs the pipeline answers from the one labelled section less than half the
# time without a threshold (*wrong* overstates a little: a neighbouring section sometimes holds
# the same answer). When a wrong answer costs twice a hand-over, the train questions show no
# confidence above which answering pays, and calibration escalates most questions. That is
# the calibration doing its job: the number says *this pipeline should not answer Python
# questions on its own* — improve retrieval and reading there first (chapter 10), or accept a
# cheaper wrong answer (the `wrong_cost 1` row shows what that buys).

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ### Deep dive · A promise instead of a best guess
#
# The threshold above is the best one *on the dev questions*; it promises nothing about the
# next question. `calibrate` can instead keep a stated promise: "at most α of the answers
# delivered are wrong, with probability 1 − δ over the draw of the labelled questions"
# (`target_error=α`, `probability=1 − δ`). Among the answers a threshold lets through, the
# wrong ones are a binomial draw, so a binomial tail says how surprising so few wrong answers
# would be if the true error were α; five thresholds fixed before any label is read (those
# delivering 1/5, 2/5, … all of the answers) are each tested at δ/5, and the most permissive
# that passes is kept (Learn then Test, Angelopoulos et al., 2021; `ragbook.calibration`).
# When none passes, every question escalates: the promise kept the only way the labels allow.

# %%
for alpha in (0.3, 0.45):
    print(f"target_error {alpha}: ", end="")
    promised = pipeline.calibrate(hc_prepared["dev"], hc_dev, target_error=alpha, probability=0.9)
promise = promised.guarantee_
test_outs = [outcome(promised.decide(x), q.gold) for x, q in zip(hc_prepared["test"], hc_test)]
test_delivered = [o for o in test_outs if o != "escalated"]
print(f"on the test split at that threshold: {len(test_delivered)} of {len(hc_test)} answered, "
      f"{test_delivered.count('wrong') / len(test_delivered):.0%} of them wrong "
      f"(the promise: at most {promise.target_error:.0%})")

# %% [markdown]
# A promise costs labels. The binomial test must rule out a true error above α from the answers
# the labelled questions deliver, so the stricter the promise, the more answers it takes — with
# a few dozen, only a loose promise can be kept, whatever the pipeline's real error. The
# tightest promise the test allows at the dev split's own error rate, for more and more
# delivered answers:

# %%
from ragbook.calibration import binomial_p_value, risk_curve

dev_all = risk_curve([x.confidence for x in hc_prepared["dev"]],
                     [outcome(pipeline.with_settings(min_confidence=None).decide(x), q.gold)
                      for x, q in zip(hc_prepared["dev"], hc_dev)])[-1]
print(f"dev, no threshold: {dev_all.delivered} answers, {dev_all.error:.1%} wrong")
for n in (dev_all.delivered, 200, 1000, 5000):
    tightest = next(a / 100 for a in range(1, 100)
                    if binomial_p_value(round(n * dev_all.error), n, a / 100) <= 0.1 / 5)
    print(f"  {n:>5,} delivered answers at that rate: the tightest promise is {tightest:.0%}")

# %% [markdown]
# The risk–coverage curve shows the whole trade on the test split: each threshold as the share
# of questions answered (coverage) against the share of those answers that are wrong. Always
# answering is the right end, always escalating the origin (no answers, no wrong ones). Where
# the curve falls as coverage shrinks, a higher floor buys accuracy; where it is flat, the floor
# drops right and wrong answers alike, and only more labels make a stricter promise possible.

# %%
test_curve = risk_curve([x.confidence for x in hc_prepared["test"]],
                        [outcome(pipeline.with_settings(min_confidence=None).decide(x), q.gold)
                         for x, q in zip(hc_prepared["test"], hc_test)])
cov = [p.delivered / len(hc_test) for p in test_curve]
err = [p.error for p in test_curve]
fig, ax = plt.subplots(figsize=(7, 3.4))
ax.plot(cov, err, drawstyle="steps-post", color="tab:blue", label="every threshold (test)")
ax.scatter([cov[-1]], [err[-1]], color="tab:red", zorder=3, label="always answer")
ax.scatter([0], [0], color="black", zorder=3, label="always escalate")
ax.scatter([len(test_delivered) / len(hc_test)], [test_delivered.count("wrong") / len(test_delivered)],
           marker="*", s=160, color="tab:green", zorder=4,
           label=f"threshold promised on dev (α = {promise.target_error})")
ax.axhline(promise.target_error, ls="--", color="gray", lw=1)
ax.set_xlabel("coverage: share of test questions answered")
ax.set_ylabel("share of answers that are wrong")
ax.set_title(f"help centre test, {len(hc_test)} questions")
ax.legend(fontsize=8, loc="lower right")
plt.tight_layout()
plt.show()

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ### Deep dive · The trade-off, one threshold at a time
#
# `ThresholdExplorer` holds a pipeline and the prepared questions; `threshold_curve` decides
# every question at every threshold of a grid (a pure function, tested in
# `tests/test_widgets.py`). The curves on both test sets, the calibrated threshold marked:

# %%
from ragbook.widgets import ThresholdExplorer, threshold_explorer

explorers = {"help centre test": ThresholdExplorer(pipeline, hc_prepared["test"], hc_test),
             "python docs test": ThresholdExplorer(py_pipeline, py_prepared["test"], py_test)}
fig, axes = plt.subplots(1, 2, figsize=(12, 3.4), sharey=True)
for ax, (name, ex), th in zip(axes, explorers.items(), (hc_threshold, py_threshold)):
    ex.plot(th, ax=ax)
    ax.set_title(f"{name}: {len(ex.questions)} questions, calibrated min_confidence {fmt(th)}")
plt.tight_layout()
plt.show()

# %% [markdown]
# ### Try it: the thresholds
#
# On the help-centre dev questions (where thresholds are chosen; test stays for reporting). Three
# sliders, each moving the one setting it names on a copy of the pipeline: the pipeline's
# `min_confidence`, the floor on the second stage's best score; the reader's `min_span_score`, the
# best sentence's cosine (starting at the value the package ships, printed at the top); and the
# second stage's own cut, `min_rerank_score` (off by default: a passage under it is never read).

# %%
dev_explorer = ThresholdExplorer(pipeline, hc_prepared["dev"], hc_dev)
print(dev_explorer.stats(pipeline.min_confidence))   # where the sliders start: the calibrated threshold
threshold_explorer(dev_explorer)

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ### Deep dive · What each stage costs
#
# The traces time every stage, but the runs above read embeddings from the disk cache. For the
# cost of a question nobody asked before, the same pipelines with the caches off, on 8
# help-centre and 3 Python-docs test questions (models loaded first):

# %%
from ragbook.late_interaction import MaxSimScorer


def uncached(pipe):
    """The same indexes and reader, embedding every query and sentence afresh."""
    cold = Encoder(cache=False, show_progress=False)
    dense_cold = pipe.retriever.dense.with_settings(encoder=cold)   # same vectors, no cache
    # offline, a MaxSim with no token vectors in memory (a cross-encoder caches nothing)
    fresh = CrossEncoderReranker(MaxSimScorer(cold)) if isinstance(pipe.reranker.model, MaxSimScorer) else pipe.reranker
    return Pipeline(pipe.retriever.with_settings(dense=dense_cold), reranker=fresh,
                    reader=pipe.reader.with_settings(encoder=cold))


stage_ms = {}
for name, pipe, qs in (("help centre", pipeline, hc_test[:8]), ("python docs", py_pipeline, py_test[:3])):
    cold = uncached(pipe)
    cold.ask("warm up: load both models")
    seconds = {}
    for q in qs:
        for s in cold.ask(*with_history(q)).trace:
            seconds.setdefault(s.name, []).append(s.seconds)
    stage_ms[name] = {k: 1e3 * float(np.median(v)) for k, v in seconds.items()}
print(f"{'median ms':12s}" + "".join(f"{k:>9s}" for k in stage_ms["help centre"]))
for name, ms in stage_ms.items():
    print(f"{name:12s}" + "".join(f"{v:9.1f}" for v in ms.values()))

# %% [markdown]
# With nothing in memory the second stage costs most: it runs the encoder over every token of
# all 50 candidates, where the reader embeds the sentences of five and the dense channel one
# query; BM25 and fusion cost next to nothing. That is the price of chapter 6's gain, paid on
# every question whose passages are new — the second stage and the reader, not the index, are
# what to budget for, and the caches (token vectors in memory, embeddings on disk) are why the
# runs above took a fraction of this. (Absolute times depend on the machine and on what else
# it runs.)

# %% [markdown]
# ## 6 · What you built, what you measured
#
# The pipeline, its traces, condensation, escalation rules and calibrated thresholds — and the
# numbers this run measured, printed from the variables above:

# %%
hc_cal, py_cal = hc_rates[f"min_confidence {fmt(hc_threshold)}"], py_rates[f"min_confidence {fmt(py_threshold)}"]
print("built: Pipeline = condense -> dense + BM25 -> RRF -> second stage -> cut to 5 -> read -> decide, "
      "with a JSON-lines trace per question")
print(f"follow-ups ({len(follow_ups)}), recall@10: " + ", ".join(
    f"{name} {np.mean(list(v.values())):.3f}" for name, v in fu_recall.items()))
print(f"conflicts caught: {caught} of {len(conflict_qs)}, false alarms {false_alarms} of {len(others)}; "
      f"superseded pages as candidates with the filter off: {trap_in} of {len(traps)} trap questions, with it: 0")
for name, th, r in (("help centre", hc_threshold, hc_cal), ("python docs", py_threshold, py_cal)):
    print(f"{name} test at min_confidence {fmt(th)}: " + ", ".join(
        f"{o} {m:.2f} [{lo:.2f}, {hi:.2f}]" for o, (m, lo, hi) in r.items()))
print(f"promise calibrated on dev (target_error {promise.target_error}, probability {promise.probability}): "
      f"{'escalate all' if promise.escalate_all else fmt(promised.min_confidence)}; on test "
      f"{test_delivered.count('wrong') / len(test_delivered):.0%} of {len(test_delivered)} answers wrong")
print("median ms per stage, uncached: " + "; ".join(
    f"{name}: dense {ms['dense']:.0f}, bm25 {ms['bm25']:.0f}, rerank {ms['rerank']:.0f}, read {ms['read']:.0f}"
    for name, ms in stage_ms.items()))
