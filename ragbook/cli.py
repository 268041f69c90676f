"""The command line: build an index from your documents, ask it questions, measure it.

    ragbook index docs/ --out my-index          documents -> chunks -> dense + BM25, saved
    ragbook ask my-index "refund window?"       retrieve -> read -> answer, or escalate
    ragbook eval my-index questions.jsonl       chapter 4's table for dense, BM25, hybrid
    ragbook eval ... --against baseline.json    the regression gate (--save writes a baseline)
    ragbook tune my-index questions.jsonl --out tuned.json   settings the labels support
    ragbook serve my-index                      the page and a JSON API on http://127.0.0.1:8000/

Exit codes: 0 success (an escalated answer is a success: it is the right outcome for a
question the documents cannot answer), 1 a failure while running (missing or corrupt index,
unreadable input), 2 a usage error, 3 the regression gate failed (``eval --against``). Every
error is one line on stderr, ``ragbook: error: <what went wrong>; <what to do>``;
``--debug`` shows the traceback instead.
"""
from __future__ import annotations

import argparse
import inspect
import json
import sys
import time
import warnings
from pathlib import Path

from . import commands, models
from .ask_output import result_lines, streamed_answer
from .embeddings import Encoder
from .explain import explain_result_dicts
from .folding import terminal_width
from .ingest import SUFFIXES, read_documents, sync_index
from .persist import CorruptIndexError
from .pipeline import Pipeline
from .questions import read_questions
from .readers import GenerativeReader, default_extractive_reader
from .terminal import json_text, one_line
from .tuned import load_settings

__all__ = ["main", "build_parser", "read_questions"]

PROG = "ragbook"
#: ``ragbook ask``'s defaults are ``Pipeline``'s own, read from its signature: one place
#: defines them, so the same question gets the same answer from Python and the shell.
ASK_DEFAULTS = {name: inspect.signature(Pipeline).parameters[name].default
                for name in ("keep", "min_confidence")}


class UsageError(Exception):
    """The command line itself is wrong (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line that says where the help is."""

    def error(self, message: str):
        raise UsageError(f"{message}; see '{self.prog} --help'")


def _whole(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {minimum}, got {text!r}")
        return value
    return parse


def _scope_part(text: str) -> tuple[str, str | list[str]]:
    """``--scope KEY=VALUE`` (or ``KEY=V1,V2``: one of) as a (key, condition) pair."""
    key, eq, value = text.partition("=")
    values = [v.strip() for v in value.split(",")]
    if not eq or not key.strip() or not all(values):
        raise argparse.ArgumentTypeError(f"must be KEY=VALUE or KEY=V1,V2 (e.g. access=public), "
                                         f"got {text!r}")
    return key.strip(), values if len(values) > 1 else values[0]


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m ragbook`` argument parser (subcommands ``index``, ``ask``, ...); public so
    tests and documentation can list the options without running a command."""
    parser = _Parser(prog=PROG, description="Build, query and measure a retrieval-augmented "
                     "question-answering index over your own documents.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str, description: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=description)
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show tracebacks on errors")
        return p

    p = command("index", "build an index from a folder of documents or a JSONL file",
                f"Read SRC (a folder of {'/'.join(SUFFIXES)} files — PDF, HTML and Word need "
                "the documents extra —, or a .jsonl file with id and text per line), chunk it, "
                "embed the chunks and build a BM25 index, and save "
                "both to OUT. Resumable: embeddings are cached on disk as they are computed, "
                "so re-running after an interrupt embeds only what is missing. On an index "
                "that OUT already holds, only the documents added, changed (content hash) or "
                "deleted since are written again (--rebuild: everything).")
    p.add_argument("src", metavar="SRC", help="folder of documents, or a .jsonl file")
    p.add_argument("--out", required=True, metavar="PATH", help="folder to save the index to")
    p.add_argument("--size", type=_whole(1), default=256, help="chunk size in encoder tokens "
                   "(default 256)")
    p.add_argument("--overlap", type=_whole(0), default=32, help="tokens shared by "
                   "neighbouring chunks (default 32)")
    p.add_argument("--rebuild", action="store_true", help="build OUT again in full (default: "
                   "when OUT is an index of SRC made with the same --size and --overlap, "
                   "update only the documents added, changed or deleted since)")
    p.add_argument("--fast", action="store_true", help="embed in bfloat16 (about 2.7x faster "
                   "on a CPU with AMX; recall@10 within 0.01 of fp32 on both test sets, "
                   "docs/benchmarks.md); refused where this machine has no bf16 units. "
                   "'ragbook ask' then embeds questions the same way")
    p.set_defaults(run=_index)

    p = command("ask", "answer a question from an index, or escalate it",
                "Retrieve, read and answer QUESTION with its sources; when the index does not "
                "support an answer, print 'escalated: <reason>' and the passages a human should "
                "look at (exit code 0 either way).")
    p.add_argument("index", metavar="PATH", help="an index saved by 'ragbook index'")
    p.add_argument("question", metavar="QUESTION")
    p.add_argument("--keep", type=_whole(1), default=ASK_DEFAULTS["keep"],
                   help=f"passages the reader reads (default {ASK_DEFAULTS['keep']}, as Pipeline)")
    p.add_argument("--min-confidence", type=_finite, default=ASK_DEFAULTS["min_confidence"],
                   metavar="COSINE", help="escalate (low_confidence) when the best dense "
                   "cosine is below this (default: none, as Pipeline; it depends on the "
                   "encoder and the corpus: 'ragbook calibrate' chooses one on your labelled "
                   "questions and --settings applies it)")
    p.add_argument("--min-span-score", type=_finite, default=None, metavar="COSINE",
                   help="the extractive reader's floor: escalate (reader_abstained) when no "
                   "sentence scores this much (default: the reader's own, as Pipeline: the "
                   "floor calibrated for the offline encoder)")
    p.add_argument("--json", action="store_true", help="print the full result as JSON")
    p.add_argument("--trace", metavar="FILE", help="append the pipeline trace to FILE as one "
                   "JSON line")
    p.add_argument("--scope", type=_scope_part, action="append", metavar="KEY=VALUE",
                   help="search only items whose metadata KEY is VALUE (KEY=V1,V2: one of "
                   "them), e.g. --scope access=public; repeat for several keys. An item "
                   "without KEY is outside the scope")
    p.add_argument("--generative", action="store_true", help="write the answer with a chat "
                   "model (RAGBOOK_LLM_BASE_URL and RAGBOOK_LLM_MODEL, else the profile's "
                   "local generator) instead of quoting a sentence; it streams, each sentence "
                   "shown once its citation is checked")
    p.add_argument("--settings", metavar="FILE", help="retrieve with the settings 'ragbook "
                   "tune' or 'calibrate' wrote for this index (refused for another index)")
    p.add_argument("--explain", action="store_true", help="under the sources, print why each "
                   "scored what it did: the parts (query terms, channels, token alignments) "
                   "that add up to its score, and the scope/filter conditions it met; with "
                   "--json, as a list per source under \"explanations\"")
    p.set_defaults(run=_ask)

    p = command("serve", "serve an index over HTTP: a page, and ask/stream/explain as JSON",
                "Serve PATH at http://HOST:PORT/ until Ctrl-C: the page, POST /ask, /stream "
                "(server-sent events) and /explain, GET /schema. Needs the serve extra (pip "
                "install 'ragbook[serve]'). --scope fixes what every request may search; a "
                "request can narrow it, never widen it.")
    p.add_argument("index", metavar="PATH", help="an index saved by 'ragbook index'")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default "
                   "127.0.0.1: this machine only)")
    p.add_argument("--port", type=_whole(0), default=8000, help="default 8000 (0: a free one)")
    p.add_argument("--settings", metavar="FILE", help="the settings 'ragbook tune' or "
                   "'calibrate' wrote for this index, as 'ragbook ask --settings'")
    p.add_argument("--scope", type=_scope_part, action="append", metavar="KEY=VALUE",
                   help="serve only items whose metadata KEY is VALUE (KEY=V1,V2: one of "
                   "them), as 'ragbook ask --scope'; repeat for several keys")
    p.set_defaults(run=_serve)

    p = command("eval", "measure retrieval on labelled questions",
                "Score the dense channel, the BM25 channel and the hybrid on QUESTIONS (JSONL: "
                '{"id", "question", "gold": [document ids]} per line) with recall@5, '
                "recall@10, MRR@10 and nDCG@10, each with a 95% bootstrap interval.")
    p.add_argument("index", metavar="PATH", help="an index saved by 'ragbook index'")
    p.add_argument("questions", metavar="QUESTIONS", help="JSONL file of labelled questions")
    p.add_argument("--settings", metavar="FILE", help="also score the settings 'ragbook tune' "
                   "wrote (the run 'tuned')")
    p.add_argument("--save", metavar="FILE", help="write every question's values to FILE, a "
                   "baseline for --against")
    p.add_argument("--against", metavar="FILE", help="regression gate: compare with a "
                   "baseline saved by --save; exit code 3 when the paired 95%% CI of "
                   "ΔMRR@10 lies wholly below -MARGIN, listing the questions that got worse")
    p.add_argument("--margin", type=_finite, default=0.01, help="the MRR@10 loss the gate "
                   "tolerates (default 0.01)")
    p.add_argument("--run", dest="gated", choices=("dense", "bm25", "hybrid", "tuned"),
                   help="the run the gate compares (default: tuned with --settings, else "
                   "hybrid)")
    p.set_defaults(run=_eval)

    p = command("tune", "choose retrieval settings on labelled questions",
                "Measure a small space of settings (dense, BM25, hybrid variants; no second "
                "stage, MaxSim blend, a learned reranker) on QUESTIONS with every question "
                "held out once (k-fold, nested for the choice), adopt one only when its "
                "held-out gain over dense is supported after correcting for the number of "
                "settings, and write it to OUT for 'ragbook ask --settings'.")
    p.add_argument("index", metavar="PATH", help="an index saved by 'ragbook index'")
    p.add_argument("questions", metavar="QUESTIONS", help="JSONL file of labelled questions")
    p.add_argument("--out", required=True, metavar="FILE", help="settings file to write")
    p.add_argument("--folds", type=_whole(2), default=5, help="cross-validation folds "
                   "(default 5)")
    p.add_argument("--seed", type=_whole(0), default=0, help="seed of the split (default 0)")
    p.set_defaults(run=_tune)

    p = command("calibrate", "choose the escalation threshold on labelled questions",
                "Ask every question of QUESTIONS (no gold: any answer is wrong), choose "
                "--min-confidence as chapter 9 does and write settings with it to OUT.")
    p.add_argument("index", metavar="PATH", help="an index saved by 'ragbook index'")
    p.add_argument("questions", metavar="QUESTIONS", help="JSONL file of labelled questions")
    p.add_argument("--out", required=True, metavar="FILE", help="settings file to write")
    p.add_argument("--settings", metavar="FILE", help="calibrate these tuned settings "
                   "(default: the index's own hybrid)")
    p.add_argument("--wrong-cost", type=_finite, help="maximise right - this x wrong (default 2)")
    p.add_argument("--target-error", type=_finite, metavar="ALPHA", help="instead: at most "
                   "this share of delivered answers wrong, with --probability")
    p.add_argument("--probability", type=_finite, default=0.9, help="with --target-error "
                   "(default 0.9)")
    p.set_defaults(run=_calibrate)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as err:
        return _fail(str(err), 2)
    except SystemExit as err:  # --help
        return err.code if isinstance(err.code, int) else 0
    if not args.debug:
        commands.quiet_libraries()
    try:
        with warnings.catch_warnings():       # every warning a command raises, one line each
            if not args.debug:
                warnings.showwarning = lambda message, *_, **__: _warn(str(message))
            return args.run(args)
    except UsageError as err:
        return _fail(str(err), 2)
    except KeyboardInterrupt:
        if args.debug:
            raise
        return _fail("interrupted; run the same command again (embeddings computed so far "
                     "are cached, so an index build resumes where it stopped)", 130)
    except Exception as err:
        if args.debug or not _expected(err):
            raise
        return _fail(_message(err), 1)


def _expected(err: Exception) -> bool:
    """Errors that are about the input or the environment, not bugs in ragbook."""
    return (isinstance(err, (FileNotFoundError, ValueError, TypeError, KeyError, OSError))
            or type(err).__module__.startswith("ragbook."))


def _message(err: Exception) -> str:
    if isinstance(err, KeyError):
        msg = f"missing key {err.args[0]!r}" if err.args else "missing key"
    elif isinstance(err, OSError) and err.strerror and err.filename:
        msg = f"{err.strerror}: {str(err.filename)!r}"
    else:
        msg = str(err) or type(err).__name__
    msg = " ".join(msg.split())  # one line, whatever the exception held
    return msg if ";" in msg else f"{msg}; run again with --debug to see where it failed"


def _fail(message: str, code: int) -> int:
    """Print the one error line, its control characters shown as escapes as in ``_warn``: a
    file name or a document's text in a message must not drive the terminal."""
    print(f"{PROG}: error: {one_line(' '.join(message.split()))}", file=sys.stderr)
    return code


def _warn(message: str) -> None:
    print(f"{PROG}: warning: {one_line(' '.join(message.split()))}", file=sys.stderr)


# -- index ---------------------------------------------------------------------------------
def _check_out(out: Path) -> None:
    """Refuse an --out that is not ours to replace: saving swaps the whole folder. Checked
    before any embedding, so a bad path costs nothing."""
    here = Path.cwd().resolve()
    if out.resolve() == here or out.resolve() in here.parents:
        raise UsageError(f"--out {str(out)!r} is the current folder or one above it, which the "
                         f"index would replace; give a new folder, e.g. --out my-index")
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"--out {str(out)!r} is a file; give a folder path for the index")
    if out.is_dir() and any(out.iterdir()):
        manifest = out / "manifest.json"
        try:
            kind = json.loads(manifest.read_text(encoding="utf-8")).get("kind")
        except (OSError, ValueError, AttributeError):
            kind = None
        if kind != "HybridRetriever":
            raise FileExistsError(f"--out {str(out)!r} is a folder that is not a ragbook index "
                                  f"and saving would replace it; choose a new path")


def _index(args) -> int:
    if args.overlap >= args.size:
        raise UsageError(f"--overlap {args.overlap} must be smaller than --size {args.size}; "
                         f"see 'ragbook index --help'")
    if args.fast and not models.bf16_supported():
        raise UsageError("--fast embeds in bfloat16, which this machine runs slower than fp32 "
                         "(its CPU has neither AMX nor AVX512-BF16, and there is no GPU); run "
                         "the same command without --fast")
    out = Path(args.out)
    _check_out(out)
    t = time.perf_counter()
    docs = read_documents(args.src)         # its warnings print as they come (main)
    encoder = Encoder(show_progress=True, precision="bf16" if args.fast else "fp32")
    try:
        done = sync_index(docs, out, encoder, size=args.size, overlap=args.overlap,
                          rebuild=args.rebuild,
                          on_full_build=lambda why: print(     # why quotes OUT's manifest
                              f"building {out} again in full: {one_line(why)}"))
    except CorruptIndexError as err:
        raise CorruptIndexError(f"{err}; to build it again from SRC, run the same command "
                                f"with --rebuild") from None
    cached = f"({encoder.cache_misses} embedded, {encoder.cache_hits} from cache)"
    if done.rebuilt:
        print(f"indexed {len(docs)} documents as {done.chunks_written} chunks in "
              f"{time.perf_counter() - t:.1f} s {cached}; saved to {out}")
        return 0
    print(f"{len(done.added)} added, {len(done.changed)} changed, {len(done.deleted)} deleted, "
          f"{done.unchanged} unchanged documents ({done.chunks_written} chunks written, "
          f"{done.chunks_removed} removed, {len(done.retriever)} in all) in "
          f"{time.perf_counter() - t:.1f} s {cached}; "
          + (f"saved to {out}" if done.saved else f"{out} was up to date"))
    return 0


# -- ask -------------------------------------------------------------------------------------
def _ask(args) -> int:
    if not args.question.strip():
        raise UsageError("QUESTION is blank; ask something, e.g. ragbook ask PATH "
                         "\"how long is the refund window?\"")
    scope = dict(args.scope or ()) or None
    if scope is not None and len(scope) < len(args.scope):
        raise UsageError("--scope names a KEY twice; give its values once, comma-separated "
                         "(--scope access=public,customer)")
    models.use_threads(models.free_cores())  # one question: no more threads than idle cores
    retriever = commands.load_index(args.index)
    if args.generative and args.min_span_score is not None:
        raise UsageError("--min-span-score is the extractive reader's floor; --generative "
                         "writes the answer with a chat model instead: give one of them")
    reader = (GenerativeReader(keep=args.keep) if args.generative else None
              if args.min_span_score is None else
              default_extractive_reader(min_span_score=args.min_span_score))
    tuned = (load_settings(args.settings, retriever) if args.settings else
             {"retriever": retriever})
    kind = (tuned.get("reranker") or tuned["retriever"]).confidence_kind
    if args.min_confidence is not None and kind != "cosine":   # a cosine means nothing here
        _warn(f"--min-confidence is a cosine, but with these settings the confidence is a "
              f"{kind} score: no threshold applies (choose one with 'ragbook calibrate')")
    elif args.min_confidence is not None:
        tuned.update(min_confidence=args.min_confidence, min_confidence_kind=kind)
    pipeline = Pipeline(**tuned, reader=reader, keep=args.keep, trace_path=args.trace)
    width = terminal_width()
    if args.generative and not args.json:        # stream: verified sentences as they come
        result, shown = streamed_answer(pipeline, args.question, scope, width,
                                        lambda text: print(text, end="", flush=True))
    else:
        result, shown = pipeline.ask(args.question, scope=scope), False
    if args.json:
        out = result.to_dict()
        if args.explain:                          # one list per source, as serve's /explain
            out["explanations"] = explain_result_dicts(pipeline, result)
        print(json_text(out))
        return 0
    explained = commands.explain_lines(pipeline, result) if args.explain else []
    print("\n".join(result_lines(pipeline, result, shown=shown, explained=explained,
                                 width=width)))
    return 0


# -- serve (ragbook.serving.app) ----------------------------------------------------------
def _serve(args) -> int:
    scope = dict(args.scope or ()) or None
    if scope is not None and len(scope) < len(args.scope):
        raise UsageError("--scope names a KEY twice; give its values once, comma-separated")
    try:
        from .serving.app import serve
    except ModuleNotFoundError as err:
        raise OSError(f"'ragbook serve' needs {err.name}, which is not installed; "   # exit 1
                      f"pip install 'ragbook[serve]'") from None
    serve(args.index, settings=args.settings, host=args.host, port=args.port, scope=scope)
    return 0


# -- eval, tune, calibrate (ragbook.commands) ------------------------------------------------
def _eval(args) -> int:
    return commands.eval_command(args.index, args.questions, settings=args.settings,
                                 save=args.save, against=args.against, margin=args.margin,
                                 run=args.gated, warn=_warn)


def _tune(args) -> int:
    if Path(args.out).is_dir():
        raise UsageError(f"--out {args.out!r} is a folder; give a file path, e.g. --out "
                         f"tuned.json")
    return commands.tune_command(args.index, args.questions, args.out, folds=args.folds,
                                 seed=args.seed)


def _calibrate(args) -> int:
    return commands.calibrate_command(
        args.index, args.questions, args.out, settings=args.settings,
        target_error=args.target_error, probability=args.probability, wrong_cost=args.wrong_cost)
