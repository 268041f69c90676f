import pytest

from ragbook.llm import ChatServer, LocalLLM, OpenAICompatibleLLM, get_llm

MESSAGES = [{"role": "system", "content": "Answer in one word."},
            {"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def local():
    return LocalLLM(max_new_tokens=12)


@pytest.mark.slow
def test_local_generation_is_greedy_and_repeatable(local):
    first = local.generate(MESSAGES)
    assert "Paris" in first and local.generate(MESSAGES) == first


@pytest.mark.slow
def test_endpoint_backend_against_a_real_http_server(local):
    """The OpenAI client talks to a real chat-completions server on localhost that serves
    the local model: same greedy answer as calling the model directly."""
    with ChatServer(local) as server:
        remote = OpenAICompatibleLLM(base_url=server.base_url, model="local", max_new_tokens=12)
        assert remote.generate(MESSAGES) == local.generate(MESSAGES)
        assert remote.generate(MESSAGES, stop=["ri"]) == local.generate(MESSAGES, stop=["ri"])


def test_server_rejects_bad_requests(local):
    import json
    import urllib.error
    import urllib.request

    with ChatServer(local) as server:
        req = urllib.request.Request(server.base_url + "/chat/completions", data=b'{"messages": []}',
                                     headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=30)
        assert err.value.code == 400 and "messages is empty" in json.loads(err.value.read())["error"]["message"]


def test_endpoint_needs_url_and_model(monkeypatch):
    monkeypatch.delenv("RAGBOOK_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("RAGBOOK_LLM_MODEL", raising=False)
    with pytest.raises(ValueError, match="RAGBOOK_LLM_BASE_URL and RAGBOOK_LLM_MODEL"):
        OpenAICompatibleLLM()
    assert isinstance(get_llm(), LocalLLM)
    monkeypatch.setenv("RAGBOOK_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("RAGBOOK_LLM_MODEL", "qwen2.5")
    assert isinstance(get_llm(), OpenAICompatibleLLM) and get_llm().name == "qwen2.5 @ http://127.0.0.1:9/v1"


def test_bad_messages_are_explained(local):
    with pytest.raises(ValueError, match=r"messages\[0\] must be"):
        local.generate([{"role": "robot", "content": "hi"}])


@pytest.mark.slow
def test_scores_rank_the_right_continuation_first(local):
    paris, london = local.score(MESSAGES, ["Paris", "London"])
    assert paris > london
    after = local.score(MESSAGES, [" Paris.", " Madrid."], prefix="The capital of France is")
    assert after[0] > after[1] and all(s < 0 for s in after)
    with pytest.raises(ValueError, match="options is empty"):
        local.score(MESSAGES, [])


@pytest.mark.slow
def test_replies_are_cached_on_disk_and_equal_to_fresh_ones(tmp_path, monkeypatch):
    import sqlite3

    monkeypatch.setenv("RAGBOOK_CACHE", str(tmp_path))
    cached = LocalLLM(max_new_tokens=12)
    first = cached.generate(MESSAGES, stop=["."])
    files = list((tmp_path / "generations").glob("*.sqlite"))
    assert len(files) == 1
    assert sqlite3.connect(files[0]).execute("SELECT count(*) FROM reply").fetchone()[0] == 1
    assert cached.generate(MESSAGES, stop=["."]) == first == LocalLLM(max_new_tokens=12, cache=False).generate(MESSAGES, stop=["."])
    assert not first.endswith(".")                                   # cut at the stop string
