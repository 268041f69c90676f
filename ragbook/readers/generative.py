"""The generative reader: a chat model writes the answer, and the code checks what it cites.

The prompt, citation parsing, claim splitting and the support check it uses are in
``readers.grounding``; the extractive gate it can consult is any ``SpanReader`` with a
calibrated ``min_span_score``.
"""
from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from ..checks import check_k
from ..component import Component
from ..llm import default_llm_identity, get_llm
from ..types import Answer, Hit
from .grounding import (
    _CITE,
    NOT_IN_CONTEXT,
    build_messages,
    is_abstention,
    order_for_reading,
    parse_citations,
    split_claims,
    support,
)
from .planted import planted_sentences

__all__ = ["GenerativeReader"]


class GenerativeReader(Component):
    """Answer from the first ``keep`` hits with a chat model, with citations checked.

    Returns ``Answer(text, sources, scores, reason)``: ``reason="not_in_context"`` (and no
    text) when the model abstains; ``reason="no_candidates"`` without hits. An answer that
    is not grounded keeps its text but is flagged, never passed off as grounded:
    ``"uncited"`` (no ``[n]``), ``"invalid_citation"`` (cites a passage that does not exist),
    ``"unsupported"`` (no sentence is backed by a passage, see ``min_support``).

    Small models follow the contract poorly, so each rule can be enforced rather than asked
    for (``bench/generative.py`` measures what each buys, ``docs/benchmarks.md`` records it;
    the defaults are what measured best without calibration: stop, worked examples,
    verification):

    * ``stop`` — replies end at the first blank line (no rambling into fake passages);
    * ``few_shot`` — worked examples of a cited answer and of ``NOT_IN_CONTEXT``;
    * ``scored_citations`` — each sentence's ``[n]`` is *chosen* as the likeliest of
      ``[1]..[keep]`` under the model, so every citation exists (backends with ``score``
      only);
    * ``abstain_logprob`` — abstain when log p(``NOT_IN_CONTEXT``) as the reply exceeds this
      threshold (calibrate it on training questions; backends with ``score`` only);
    * ``min_support`` — post-hoc verification: a sentence must share this fraction of its
      content words with a passage it cites (and every figure in it must occur there);
      otherwise it is re-cited to the passage that does back it, or dropped. With
      ``scored_citations=False`` and a model that writes no ``[n]``, this is what cites;
    * ``gate`` — an extractive reader with a calibrated ``min_span_score`` (e.g.
      ``SentenceReader``): when it abstains, so does this reader, without calling the model.

    Passages are untrusted: their text cannot break out of its fence in the prompt
    (``build_messages``), and the sentences planted for the model (``planted_sentences``:
    each sentence and adjacent pair after Unicode and markup normalisation; listed in
    ``last_["instructions"]`` as (passage number, sentence)) never back a claim — a claim
    only they support is dropped, and a reply left with none is ``"unsupported"``.

    ``llm`` is any backend with ``generate`` (and optionally ``score``); None means
    ``get_llm()``, made on first use. ``keep`` is how many hits, best first, it reads.
    ``last_`` keeps the trace of the latest ``read`` (messages, raw reply, scores, claims).
    """

    def __init__(self, llm=None, keep: int = 5, few_shot: bool = True, reorder: bool = True,
                 max_new_tokens: int = 96, stop: Sequence[str] = ("\n\n",),
                 scored_citations: bool = False, abstain_logprob: float | None = None,
                 min_support: float | None = 0.5, gate=None):
        if min_support is not None and not 0 <= min_support <= 1:
            raise ValueError(f"min_support is a share of words, between 0 and 1; got {min_support}")
        self._llm, self.keep = llm, check_k(keep, "keep")
        self.few_shot, self.reorder = few_shot, reorder
        self.max_new_tokens, self.stop = max_new_tokens, tuple(stop)
        self.scored_citations, self.abstain_logprob = scored_citations, abstain_logprob
        self.min_support = min_support
        self.gate = gate
        self.latencies_: list[float] = []
        self.last_: dict = {}

    def _fingerprint_extra(self) -> dict:
        # a given chat model is a setting; the default one is named without loading it
        return {} if self._llm is not None else {"llm": default_llm_identity()}

    @property
    def llm(self):
        """The chat model: the one given, else ``get_llm()`` on first use (the endpoint of
        ``RAGBOOK_LLM_BASE_URL``, or the profile's generator; ``LLMUnavailableError`` when
        none can be loaded)."""
        if self._llm is not None:
            return self._llm
        if getattr(self, "_loaded", None) is None:  # not a setting: the default backend
            self._loaded = get_llm()
        return self._loaded

    def _can_score(self) -> bool:
        return callable(getattr(self.llm, "score", None))

    def read(self, question: str, hits: Sequence[Hit]) -> Answer:
        """Answer ``question`` from the first ``keep`` of ``hits`` (best first), or abstain or
        flag as the class docstring lists; the trace of this call is in ``last_``. Errors of
        the chat backend (``LLMUnavailableError``, ``LLMResponseError``) propagate."""
        t = time.perf_counter()
        if not hits:
            return Answer(None, reason="no_candidates")
        chosen = list(hits[:self.keep])
        passages = order_for_reading(chosen) if self.reorder else chosen
        messages = build_messages(question, passages, self.few_shot)
        self.last_ = trace = {"messages": messages, "passages": passages,
                              "instructions": [(n, s) for n, h in enumerate(passages, 1)
                                               for s in planted_sentences(h.text)]}
        try:
            return self._read(question, messages, passages, trace)
        finally:
            self.latencies_.append(time.perf_counter() - t)

    def _read(self, question, messages, passages, trace) -> Answer:
        if self.gate is not None:
            trace["gate"] = gated = self.gate.read(question, passages)
            if gated.abstained:
                return Answer(None, reason="not_in_context")
        if self.abstain_logprob is not None and self._can_score():
            trace["abstain_logprob"] = lp = self.llm.score(messages, [NOT_IN_CONTEXT])[0]
            if lp > self.abstain_logprob:
                return Answer(None, reason="not_in_context")
        reply = trace["raw"] = self.llm.generate(messages, max_new_tokens=self.max_new_tokens,
                                                 stop=self.stop)
        if is_abstention(reply):
            return Answer(None, reason="not_in_context")
        claims = split_claims(reply)
        if self.scored_citations and self._can_score() and claims:
            claims = self._choose_citations(messages, claims, len(passages))
        if self.min_support is not None:
            claims = self._verify(claims, passages, trace)
            if not claims:
                return Answer(reply, reason="unsupported")
        text = trace["text"] = " ".join(claims)
        cites = parse_citations(text, passages)
        scores = tuple(next(h.score for h in passages if h.id == s) for s in cites.sources)
        if not cites.numbers:
            return Answer(text, reason="uncited")
        if not cites.valid:
            return Answer(text, sources=cites.sources, scores=scores, reason="invalid_citation")
        return Answer(text, sources=cites.sources, scores=scores)

    def _choose_citations(self, messages, claims: list[str], n_passages: int) -> list[str]:
        """Re-cite every sentence with the likeliest of ``[1]..[n_passages]`` after it."""
        options = [f" [{n}]" for n in range(1, n_passages + 1)]
        done: list[str] = []
        for claim in claims:
            bare = _CITE.sub("", claim).rstrip(" .") or claim
            prefix = " ".join(done + [bare])
            n = int(np.argmax(self.llm.score(messages, options, prefix=prefix))) + 1
            done.append(f"{bare} [{n}].")
        return done

    def _verify(self, claims: list[str], passages: Sequence[Hit], trace) -> list[str]:
        """Keep the sentences a cited passage backs; re-cite or drop the others."""
        kept, checks = [], []
        for claim in claims:
            backing = [support(claim, h.text) for h in passages]
            cited = [n for n in map(int, _CITE.findall(claim)) if 1 <= n <= len(passages)]
            best = int(np.argmax(backing)) + 1
            if cited and max(backing[n - 1] for n in cited) >= self.min_support:
                kept.append(claim)
            elif backing[best - 1] >= self.min_support:
                kept.append(f"{_CITE.sub('', claim).rstrip(' .')} [{best}].")
            checks.append({"claim": claim, "cited": cited, "support": backing})
        trace["checks"] = checks
        return kept
