"""The one page ``ragbook serve`` serves at ``/``: a question box, the answer streamed sentence
by sentence (``POST /stream``), the escalation reason when it escalates, the sources with the
cited span highlighted inside each passage or, a click away, inside its whole document
(``POST /document``; for a PDF, the pages it lies on, as ``convert.pages_of`` counts them),
and on request why each source scored what it did (``POST /explain``). No build step and
nothing fetched from elsewhere (the server's Content-Security-Policy allows only this
script, by its hash); document text is only ever set as text, never as HTML, and an id or
detail shown inline has its invisible and reordering characters escaped, as the command
line shows them (``shown``)."""
from __future__ import annotations

from ..text import DRAWN_BLANK

__all__ = ["PAGE", "SCRIPT"]

SCRIPT = r"""
const form = document.getElementById("ask"), box = document.getElementById("question");
const answer = document.getElementById("answer"), status = document.getElementById("status");
const sources = document.getElementById("sources"), why = document.getElementById("why");
let last = null;

// Text a document chose, shown inline as the command line shows it: characters a browser
// obeys or draws as nothing (controls, bidi overrides and isolates, zero-width characters,
// line and paragraph separators, blank fillers) written as visible \u escapes — so an id
// cannot pass for another, nor reorder the words after it — and set inside a <bdi>.
const HIDDEN = [/[\p{Cc}\p{Cf}\p{Co}\p{Cn}\p{Cs}\p{Zl}\p{Zp}]/gu,    // as terminal.shown
                /@DRAWN_BLANK@/gu];                                  // text.DRAWN_BLANK
function escaped(c) {
  const n = c.codePointAt(0);
  return "\\u" + (n > 0xffff ? "{" + n.toString(16) + "}" : n.toString(16).padStart(4, "0"));
}
function shown(text) {
  return HIDDEN.reduce((s, re) => s.replace(re, escaped), String(text));
}

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (cls) node.className = cls;
  return node;
}

async function post(path, body) {
  const res = await fetch(path, {method: "POST", headers: {"Content-Type": "application/json"},
                                 body: JSON.stringify(body || {question: box.value})});
  if (!res.ok) {
    let message = res.status + " " + res.statusText;
    try { message = (await res.json()).error.message; } catch (e) {}
    throw new Error(message);
  }
  return res;
}

// The PDF pages the cited span (or else the passage) lies on: ragbook.convert.pages_of.
function pagesOf(hit, span) {
  const starts = (hit.metadata || {}).page_starts;
  if (!Array.isArray(starts) || hit.start === null) return "";
  const [a, b] = span ? [span[1], span[2]] : [hit.start, hit.end];
  const pages = [];
  starts.forEach((p, i) => {
    const q = i + 1 < starts.length ? starts[i + 1] : Infinity;
    if (p < q && p < Math.max(b, a + 1) && a < q) pages.push(i + 1);
  });
  return pages.length ? (pages.length > 1 ? ", pages " : ", page ") + pages.join(", ") : "";
}

function showSources(result) {
  sources.replaceChildren();
  const span = result.answer_span;
  const hits = result.escalated ? result.candidates : result.sources;
  document.getElementById("sources-title").textContent =
    result.escalated ? "Passages for a person to check" : "Sources";
  hits.forEach((hit, n) => {
    const item = el("li"), head = el("h3");
    const text = el("p", undefined, "passage");
    let s = -1, e = -1;
    if (!result.escalated && span && span[0] === hit.doc_id && hit.start !== null) {
      s = span[1] - hit.start; e = span[2] - hit.start;
    }
    head.append("[" + (n + 1) + "] ", el("bdi", shown(hit.doc_id)), (hit.start === null ?
      "" : ", characters " + hit.start + "\u2013" + hit.end) + pagesOf(hit, s >= 0 ? span : null));
    if (s >= 0 && e <= hit.text.length && s < e) {
      const mark = el("mark", hit.text.slice(s, e));
      mark.id = "cited-" + n;
      mark.tabIndex = -1;
      text.append(hit.text.slice(0, s), mark, hit.text.slice(e));
      const link = el("a", "show the cited words");
      link.href = "#cited-" + n;
      link.addEventListener("click", ev => { ev.preventDefault(); mark.focus(); });
      item.append(head, link, text);
    } else {
      text.textContent = hit.text;
      item.append(head, text);
    }
    if (hit.start !== null) {
      const whole = el("button", "Show in the document");
      whole.type = "button";
      whole.addEventListener("click", () => showDocument(hit, s >= 0 ? span : null, text));
      item.insertBefore(whole, text);
    }
    sources.append(item);
  });
}

// The passage's whole document in place of the passage, the cited words (else the
// passage) marked and focused; the server sends only documents inside its scope.
async function showDocument(hit, span, passage) {
  try {
    const doc = await (await post("/document", {doc_id: hit.doc_id})).json();
    const [a, b] = span ? [span[1], span[2]] : [hit.start, hit.end];
    const view = el("div", undefined, "passage document");
    view.setAttribute("aria-label", "the document " + shown(hit.doc_id));
    let mark = null;
    doc.segments.forEach(([start, text], i) => {
      if (i > 0) view.append(el("span", "\n[\u2026]\n", "gap"));
      const end = start + text.length;
      if (a >= start && b <= end && a < b) {
        mark = el("mark", text.slice(a - start, b - start));
        mark.tabIndex = -1;
        view.append(text.slice(0, a - start), mark, text.slice(b - start));
      } else {
        view.append(text);
      }
    });
    passage.replaceWith(view);
    if (mark) { mark.scrollIntoView({block: "center"}); mark.focus(); }
  } catch (err) {
    status.textContent = "Error: " + err.message;
  }
}

async function ask(ev) {
  ev.preventDefault();
  answer.replaceChildren(); sources.replaceChildren(); why.replaceChildren();
  document.getElementById("explain").hidden = true;
  status.textContent = "Searching\u2026";
  try {
    const res = await post("/stream");
    const reader = res.body.getReader(), decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, {stream: true});
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
        // fields by "\n" alone: a regex's "." and "$" would also stop at U+2028/U+2029
        const field = name => (block.split("\n").find(l => l.startsWith(name + ": ")) || "")
          .slice(name.length + 2);
        const kind = field("event"), data = JSON.parse(field("data") || "null");
        if (kind === "sentence") answer.append(el("span", data.text, "sentence"));
        if (kind === "error") throw new Error(data.message);
        if (kind === "result") finish(data);
      }
    }
  } catch (err) {
    status.textContent = "Error: " + err.message;
  }
}

function finish(result) {
  last = result;
  if (result.escalated) {
    status.replaceChildren("Escalated (" + result.reason + "): ",
                           el("bdi", shown(result.detail)));
  } else {
    status.textContent = "Answered" + (result.confidence !== null ? " (confidence " +
      result.confidence.toFixed(2) + ", " + result.confidence_kind + ")" : "") + ".";
  }
  showSources(result);
  document.getElementById("explain").hidden = result.escalated || !result.sources.length;
}

async function explain() {
  why.replaceChildren(el("p", "Explaining\u2026"));
  try {
    const data = await (await post("/explain")).json();
    why.replaceChildren();
    data.explanations.forEach((parts, n) => {
      const item = el("li");
      item.append(el("h3", "Why source [" + (n + 1) + "]"));
      parts.forEach(e => item.append(el("pre", e.text)));
      why.append(item);
    });
  } catch (err) {
    why.replaceChildren(el("p", "Error: " + err.message));
  }
}

form.addEventListener("submit", ask);
document.getElementById("explain").addEventListener("click", explain);
"""

# the script's copy of text.DRAWN_BLANK, written from it (escaped for a JavaScript /u regex)
SCRIPT = SCRIPT.replace("@DRAWN_BLANK@", "".join(
    c if c.isascii() else f"\\u{{{ord(c):x}}}" for c in DRAWN_BLANK.pattern))

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ragbook: ask your documents</title>
<style>
body { font: 16px/1.5 system-ui, sans-serif; max-width: 50rem; margin: 2rem auto;
       padding: 0 1rem; color: #1a1a1a; background: #fff; }
input[type=text] { width: 100%; font: inherit; padding: .5rem; box-sizing: border-box; }
button { font: inherit; padding: .4rem 1rem; margin-top: .5rem; }
:focus-visible { outline: 3px solid #1d4ed8; outline-offset: 2px; }
#answer { font-size: 1.15rem; min-height: 1.5em; }
.sentence + .sentence::before { content: " "; }
.sentence { unicode-bidi: isolate; }
mark { background: #fde68a; color: inherit; }
.passage { white-space: pre-wrap; background: #f5f5f4; padding: .5rem; }
.document { max-height: 24rem; overflow: auto; }
#sources li > a, #sources li > button { display: inline-block; margin: 0 1rem .5rem 0; }
pre { white-space: pre-wrap; font-size: .85rem; }
h3 { font-size: 1rem; margin-bottom: .2rem; }
</style>
</head>
<body>
<main>
<h1>Ask your documents</h1>
<form id="ask">
<label for="question">Your question</label>
<input type="text" id="question" name="question" required autocomplete="off"
       placeholder="e.g. how long is the refund window?">
<button type="submit">Ask</button>
</form>
<section aria-labelledby="answer-title">
<h2 id="answer-title">Answer</h2>
<p id="answer" aria-live="polite"></p>
<p id="status" role="status"></p>
</section>
<section aria-labelledby="sources-title">
<h2 id="sources-title">Sources</h2>
<ol id="sources"></ol>
<button type="button" id="explain" hidden>Why these sources?</button>
<ol id="why" aria-live="polite"></ol>
</section>
</main>
<script>""" + SCRIPT + """</script>
</body>
</html>
"""
