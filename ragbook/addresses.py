"""Where a text tells its reader to send something: e-mail addresses, phone numbers and bank
account numbers (IBAN), each as a comparable key.

A planted page's most harmful payload routes the user's secrets or money to the attacker:
"send the signing key to support@sso-setup.example", "pay invoices to SE45 5000 …", "call
+1-900-555-0199". Whatever language wraps it, the address itself is plain structure, and an
honest corpus gives its own contacts on many pages — so the guards
(``guards.unsupported_directive``) deliver an answer that gives an address only when another
document among the passages gives the same one, or names its site (``named_in``). Mail
domains compare by registrable domain (``billing.brightdesk.example`` and
``brightdesk.example`` are one site); numbers by their digits. Links are not addresses here:
documentation links to other sites on every page (a README's answer with a link to the
project's site is honest), so a planted "download the fix from …" is left to the detector.
The documentation domains of RFC 2606 (``example.com``, ``.net``, ``.org``) and the usual
placeholders for the reader's own (``yourcompany.com``) route nowhere.

>>> sorted(addresses("Mail help@sso-setup.example or call +1 (900) 555-0199."))
['host:sso-setup.example', 'phone:19005550199']
>>> addresses("Invite ana@example.com, then open https://docs.python.org/3/.")
set()
"""
from __future__ import annotations

import re

__all__ = ["addresses", "named_in"]

_TLD = r"(?:com|net|org|io|app|dev|info|biz|co|me|ly|xyz|site|online|top|ru|cn|example|[a-z]{2})"
_HOST = rf"(?:[a-z0-9](?:[a-z0-9-]{{0,61}}[a-z0-9])?\.)+{_TLD}"
_EMAIL = re.compile(rf"[\w.+-]+@({_HOST})\b", re.I)
# an international number ("+1 (900) 555-0199", "+44 20 7946 0958"), or the North American
# "(900) 555-0199" / "900-555-0199"; dates and versions have no "+" and other groupings
_PHONE = re.compile(r"(?<![\w+])\+\d[\d ()./-]{6,18}\d(?!\w)|\(\d{3}\) ?\d{3}-\d{4}\b|"
                    r"(?<![\w-])\d{3}-\d{3}-\d{4}(?![\w-])")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b")
_SECOND_LEVEL = {"co", "com", "org", "net", "ac", "gov", "edu", "ne", "or"}
# RFC 2606's documentation domains and the placeholders docs put for the reader's own
_DOCUMENTATION = {"example.com", "example.net", "example.org", "yourcompany.com",
                  "yourdomain.com", "your-domain.com", "mycompany.com", "company.com",
                  "domain.com"}


def _site(host: str) -> str:
    """The registrable domain of ``host``: its last two labels, three under a national
    second level (``shop.example.co.uk`` -> ``example.co.uk``)."""
    labels = host.lower().rstrip(".").split(".")
    keep = 3 if len(labels) > 2 and len(labels[-1]) == 2 and labels[-2] in _SECOND_LEVEL else 2
    return ".".join(labels[-keep:])


def addresses(text: str) -> set[str]:
    """The addresses ``text`` gives, as ``host:<registrable domain>``, ``phone:<digits>`` or
    ``iban:<characters>`` keys (two texts name the same address when they share a key)."""
    hosts = {_site(h) for h in _EMAIL.findall(text)}
    out = {f"host:{h}" for h in hosts if h not in _DOCUMENTATION}
    out |= {"phone:" + re.sub(r"\D", "", p) for p in _PHONE.findall(text)}
    ibans = (re.sub(r"\s", "", i) for i in _IBAN.findall(text))
    return out | {f"iban:{i}" for i in ibans if len(i) >= 15}


def named_in(address: str, text: str) -> bool:
    """``text`` gives ``address`` too — the same number, or a host of the same site — or
    names that site as a proper noun: capitalised inside a sentence ("sign in to Brightdesk"
    backs ``brightdesk.example``; a product's help centre names it on every page). A
    look-alike host such as ``brightdesk-help.example`` is named on none, and a host named
    after a common word (``refunds.com``) is not backed by "refunds" in a sentence."""
    if address in addresses(text):
        return True
    kind, _, value = address.partition(":")
    if kind != "host":
        return False
    labels = value.split(".")
    name = labels[-3] if len(labels) > 2 else labels[0]
    for m in re.finditer(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text, re.I):
        before = text[:m.start()].rstrip(" \t*_`\"'([")
        if m.group() != m.group().lower() and before and before[-1] not in ".!?:#\n>|":
            return True
    return False
