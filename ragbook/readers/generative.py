"""The generative reader: a chat model writes the answer, and the code checks what it cites.

The prompt, citation parsing, claim splitting and the support check it uses are in
``readers.grounding``; the extractive gate it can consult is any ``BaseSpanReader`` with a
calibrated ``min_span_score``.
"""
from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from itertools import chain

import numpy as np

from ..checks import check_k
from ..component import Component
from ..injection import planted_sentences
from ..llm import default_llm_identity, get_llm
from ..planted_pages import planted_pages
from ..streaming import Streamed, stream_reply
from ..text import sentences
from ..types import Answer, Hit
from .grounding import (
    CITE,
    NOT_IN_CONTEXT,
    build_messages,
    is_abstention,
    order_for_reading,
    parse_citations,
    split_claims,
    support,
)

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
    ``last_["instructions"]`` as (passage number, sentence)) never back a claim, nor does
    any passage of a page that carries one (its payload is as often in the next sentence or
    chunk) — a claim only they support is dropped, and a reply left with none is
    ``"unsupported"``.

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
        return Streamed(self._steps(question, hits, live=False)).result

    def stream(self, question: str, hits: Sequence[Hit]) -> Streamed[Answer]:
        """``read``, streamed: iterate for the answer's sentences as they are released, then
        ``.result`` is the ``Answer`` — the same one ``read`` gives for the same reply.

        What a customer has seen cannot be taken back, so nothing unchecked is released: a
        sentence goes out only once no later text can change it (the next sentence has
        begun) and it has passed the checks ``read`` applies — it cites, or is re-cited to,
        a passage that backs it (``min_support``), and its citations name real passages. A
        sentence that fails is dropped (as ``read`` drops it); one that is kept but flagged
        (a citation of a passage that does not exist) stops the releasing, since what follows
        it would not continue what was shown. The abstention, the ``gate`` and
        ``abstain_logprob`` decide before anything is released. So the pieces, joined, are a
        prefix of ``result.text`` (all of it when every sentence passed); the rest, and the
        verdict, are in ``result``. With ``min_support=None`` nothing is verified, so nothing
        is released: the whole answer is in ``result``. ``last_["released"]`` lists what
        went out. The reply streams from the backend's ``stream`` (``stream_reply``)."""
        return Streamed(self._steps(question, hits, live=True))

    def _steps(self, question: str, hits: Sequence[Hit], live: bool
               ) -> Generator[str, None, Answer]:
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
            return (yield from self._read(question, messages, passages, trace, live))
        finally:
            self.latencies_.append(time.perf_counter() - t)

    def _read(self, question, messages, passages, trace, live: bool
              ) -> Generator[str, None, Answer]:
        if self.gate is not None:
            trace["gate"] = gated = self.gate.read(question, passages)
            if gated.abstained:
                return Answer(None, reason="not_in_context")
        if self.abstain_logprob is not None and self._can_score():
            trace["abstain_logprob"] = lp = self.llm.score(messages, [NOT_IN_CONTEXT])[0]
            if lp > self.abstain_logprob:
                return Answer(None, reason="not_in_context")
        if live:
            reply = yield from self._released(messages, passages, trace)
        else:
            reply = self.llm.generate(messages, max_new_tokens=self.max_new_tokens,
                                      stop=self.stop)
        trace["raw"] = reply
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

    def _choose_citations(self, messages, claims: list[str], n_passages: int,
                          before: Sequence[str] = ()) -> list[str]:
        """Re-cite every sentence with the likeliest of ``[1]..[n_passages]`` after it (and
        after ``before``: the sentences already re-cited, when streaming)."""
        options = [f" [{n}]" for n in range(1, n_passages + 1)]
        done: list[str] = list(before)
        for claim in claims:
            bare = CITE.sub("", claim).rstrip(" .") or claim
            prefix = " ".join(done + [bare])
            n = int(np.argmax(self.llm.score(messages, options, prefix=prefix))) + 1
            done.append(f"{bare} [{n}].")
        return done[len(before):]

    def _verify(self, claims: list[str], passages: Sequence[Hit], trace) -> list[str]:
        """Keep the sentences a cited passage backs; re-cite or drop the others."""
        kept, checks = [], []
        # a page carrying a planted sentence backs nothing, in any of its passages read
        tainted = planted_pages(passages)
        for claim in claims:
            backing = [0.0 if h.doc_id in tainted else support(claim, h.text) for h in passages]
            cited = [n for n in map(int, CITE.findall(claim)) if 1 <= n <= len(passages)]
            best = int(np.argmax(backing)) + 1
            if cited and max(backing[n - 1] for n in cited) >= self.min_support:
                kept.append(claim)
            elif backing[best - 1] >= self.min_support:
                kept.append(f"{CITE.sub('', claim).rstrip(' .')} [{best}].")
            checks.append({"claim": claim, "cited": cited, "support": backing})
        trace["checks"] = checks
        return kept

    def _released(self, messages, passages, trace) -> Generator[str, None, str]:
        """Stream the model's reply, yielding each sentence ``stream`` may release (the same
        citation choice and ``_verify`` as ``read``, one final sentence at a time — and the
        rest once the reply has ended); return the whole reply, which ``_read`` then checks
        exactly as ``read`` does."""
        reply, seen, chosen = "", 0, []
        released = trace["released"] = []
        open_ = self.min_support is not None         # unverified text is never released
        pieces = stream_reply(self.llm, messages, self.max_new_tokens, self.stop)
        for piece in chain(pieces, [None]):          # None: the reply has ended
            if piece is not None:
                reply += piece
            if not open_:
                continue
            final = split_claims(reply) if piece is None else _final_claims(reply)
            for claim in final[seen:]:
                if self.scored_citations and self._can_score():
                    claim = self._choose_citations(messages, [claim], len(passages), chosen)[0]
                    chosen.append(claim)
                kept = self._verify([claim], passages, {})
                if not kept:
                    continue                          # dropped, as read drops it
                if not parse_citations(kept[0], passages).valid:
                    open_ = False                     # flagged: hold the rest for the verdict
                    break
                yield (" " if released else "") + kept[0]
                released.append(kept[0])
            # split_claims drops a repeated sentence once it is complete, so the list can
            # shrink for a moment (a repeat being typed is a claim, then gone): never go back
            seen = max(seen, len(final))
        return reply

def _final_claims(reply: str) -> list[str]:
    """The claims (``split_claims``) of a reply still being written that no later text can
    change: all but the last — and all but the last two when the last sentence begins with
    ``[``, since citation marks that open a sentence belong to the claim before it."""
    claims = split_claims(reply)
    last = sentences(" ".join(reply.split()))[-1:]
    open_ = 2 if last and last[0].startswith("[") else 1
    return claims[:max(0, len(claims) - open_)]
