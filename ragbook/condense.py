"""Query condensation: a follow-up ("and on the free plan?") made into a stand-alone
retrieval query, by rules offline (``RuleCondenser``) or by a chat model (``LLMCondenser``,
falling back to the rules when its reply cannot be trusted). The pipeline's first stage.

>>> RuleCondenser().condense("and on the free plan?",
...                          [{"role": "user", "content": "csv export on pro?"}])
'csv export on free? and on the free plan?'
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence

from .checks import check_k, check_query
from .component import Component
from .llm import default_llm_identity, get_llm

__all__ = ["RuleCondenser", "LLMCondenser", "CONDENSE_PROMPT"]


_PLANS = ("free", "starter", "pro", "team", "enterprise")
_PLAN = re.compile(r"\b(" + "|".join(_PLANS) + r")\b", re.I)
_CONNECTIVE = re.compile(r"^\s*(and|but|also|so|ok(ay)?|cool|nice|then|what about|how about|"
                         r"what if)\b", re.I)
_BACK_REFERENCE = re.compile(r"\b(it|that|this|those|these|they|them|there|one|ones|"
                             r"the two|either)\b", re.I)


def _last_user_turn(history: Sequence[Mapping[str, str]]) -> str | None:
    if isinstance(history, (str, bytes)) or not isinstance(history, Iterable):
        raise TypeError(f"history must be a list of {{'role': ..., 'content': ...}} turns, "
                        f"not a {type(history).__name__}")
    for turn in reversed(list(history)):
        if not isinstance(turn, Mapping) or not isinstance(turn.get("content"), str):
            raise TypeError(f"each history turn must be {{'role': ..., 'content': str}}, got "
                            f"{turn!r:.60}")
        if turn.get("role") == "user" and turn["content"].strip():
            return turn["content"]
    return None


class RuleCondenser(Component):
    """The offline condenser: no model, a few rules that cover most follow-ups.

    A message is a follow-up when it is short (``max_words``), opens with a connective
    ("and ...", "what about ...") or refers back ("it", "that", "they", ...). Then the
    previous user turn is prepended, with any plan it names swapped for the plan the new
    message names ("csv on pro?" + "and on the free plan?" → "csv on free? and on the free
    plan?"). Not a fluent rewrite — a retrieval query that carries the missing context.
    """

    def __init__(self, max_words: int = 8):
        self.max_words = check_k(max_words, "max_words")

    def is_follow_up(self, question: str) -> bool:
        """True when ``question`` needs the earlier turn to make sense: short, opening with a
        connective, or referring back (see the class docstring)."""
        return (len(question.split()) <= self.max_words or bool(_CONNECTIVE.match(question))
                or bool(_BACK_REFERENCE.search(question)))

    def condense(self, question: str, history: Sequence[Mapping[str, str]] | None = None
                 ) -> str:
        """``question`` as a stand-alone retrieval query: unchanged unless it is a follow-up
        and ``history`` (``{"role", "content"}`` turns) has an earlier user turn. Raises
        ``TypeError`` when ``history`` is not a list of such turns."""
        question = check_query(question)
        previous = _last_user_turn(history) if history else None
        if previous is None or not self.is_follow_up(question):
            return question
        plans = _PLAN.findall(question)
        if plans:
            previous = _PLAN.sub(plans[0].lower(), previous)
        return f"{previous.strip()} {question.strip()}"


CONDENSE_PROMPT = (
    "Rewrite the user's last message as one stand-alone question that can be understood "
    "without the conversation. Keep every product, plan, number and error code. Reply with "
    "the question only.")


def _scripts(text: str) -> set[str]:
    """The writing systems of ``text``'s letters (``LATIN``, ``CYRILLIC``, ``CJK``, ...)."""
    return {unicodedata.name(c, "?").split()[0] for c in text if c.isalpha()}


def distrust(reply: str, question: str, history: Sequence[Mapping[str, str]],
             max_words: int) -> str | None:
    """Why a model's condensed ``reply`` cannot be trusted as the retrieval query (and the
    reader's question), or None: it is empty; it runs over several lines (any line break,
    ``\\r`` and U+2028 included); it has over ``max_words`` words, or over twice the
    characters of the conversation and question it condenses (a rewrite adds context, it
    does not write an essay — nor one 10,000-character "word"); it holds control characters
    or text that is not Unicode (a lone surrogate); or it writes letters of a script the
    conversation never uses (another language, look-alike letters)."""
    source = question + " ".join(str(t.get("content", "")) for t in history)
    if not reply:
        return "empty"
    if len(reply.splitlines()) > 1:
        return "several lines"
    if len(reply.split()) > max_words or len(reply) > 2 * len(source):
        return "too long"
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in reply):
        return "control characters or invalid Unicode"
    if _scripts(reply) - _scripts(source):
        return "a script the conversation does not use"
    return None


class LLMCondenser(Component):
    """Condense with a chat model (any ``ragbook.llm`` backend): the conversation and the last
    message go in, one stand-alone question comes out. A reply that cannot be trusted
    (``distrust``: empty, several lines, too long for what it condenses, control characters,
    another script) is not used: the ``fallback`` (``RuleCondenser``) answers instead, and
    ``last_`` records which one did (and why)."""

    def __init__(self, llm=None, fallback: RuleCondenser | None = None,
                 max_new_tokens: int = 48, max_words: int = 40):
        self._llm, self.fallback = llm, fallback if fallback is not None else RuleCondenser()
        self.max_new_tokens = check_k(max_new_tokens, "max_new_tokens")
        self.max_words = check_k(max_words, "max_words")
        self.last_: dict = {}

    @property
    def llm(self):
        """The chat model: the one given, else ``get_llm()`` on first use (the profile's
        generator; ``LLMUnavailableError`` when none can be loaded)."""
        if self._llm is not None:
            return self._llm
        if getattr(self, "_loaded", None) is None:  # loads a model: only when first needed
            self._loaded = get_llm()
        return self._loaded

    def _fingerprint_extra(self) -> dict:
        # the default chat model, by name and weights, without loading it
        return {} if self._llm is not None else {"llm": default_llm_identity()}

    def messages(self, question: str, history: Sequence[Mapping[str, str]]) -> list[dict]:
        """The chat messages asking the model to rewrite ``question``: the instruction, the
        conversation as ``Role: text`` lines, and the last message."""
        lines = [f"{t.get('role', 'user').capitalize()}: {t['content'].strip()}"
                 for t in history if t.get("content", "").strip()]
        return [{"role": "system", "content": CONDENSE_PROMPT},
                {"role": "user", "content": "Conversation:\n" + "\n".join(lines)
                 + f"\n\nLast message: {question.strip()}\n\nStand-alone question:"}]

    def condense(self, question: str, history: Sequence[Mapping[str, str]] | None = None
                 ) -> str:
        """``question`` rewritten by the model as a stand-alone question, or unchanged without an
        earlier user turn; a reply that cannot be trusted (``distrust``) gives the fallback's
        answer instead. ``last_["by"]`` records which (``last_["why"]``: why not the model)."""
        question = check_query(question)
        if not history or _last_user_turn(history) is None:
            self.last_ = {"by": "none", "reply": None}
            return question
        reply = self.llm.generate(self.messages(question, history),
                                  max_new_tokens=self.max_new_tokens, stop=("\n\n",))
        text = reply.strip().strip('"').strip()
        why = distrust(text, question, history, self.max_words)
        if why is not None:
            self.last_ = {"by": "fallback", "reply": reply, "why": why}
            return self.fallback.condense(question, history)
        self.last_ = {"by": "llm", "reply": reply}
        return text
