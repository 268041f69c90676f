import numpy as np
import pytest

from ragbook import Encoder, models
from ragbook.rerank import CrossEncoderReranker, WindowScorer, windows
from ragbook.types import Hit

PASSAGES = ["Enterprise annual contracts carry a 14-day refund window measured from the invoice "
            "date.",
            "Our office is closed on Sundays.",
            "Monthly plans carry 30 days.",
            "The Hub needs outbound port 8883 to reach the relay."]
QUERY = "What is the refund window for enterprise contracts?"


def candidate_hits():
    return [Hit(f"p{i}", 0.5 - i / 100, i + 1, doc_id=f"p{i}", text=t)
            for i, t in enumerate(PASSAGES)]


@pytest.fixture(scope="module")
def minilm_cross_encoder(tmp_path_factory):
    """The standard reranker's architecture (BertForSequenceClassification, one logit) built
    from the packaged MiniLM weights. Its head is untrained, so its *ranking* means nothing:
    it exercises exactly the code path the standard cross-encoder runs."""
    import torch
    from sentence_transformers import CrossEncoder
    from transformers import AutoTokenizer, BertForSequenceClassification

    torch.manual_seed(0)
    path = models.resolve("encoder", "offline").path
    target = tmp_path_factory.mktemp("ce")
    BertForSequenceClassification.from_pretrained(path, num_labels=1).save_pretrained(target)
    AutoTokenizer.from_pretrained(path).save_pretrained(target)
    return CrossEncoder(str(target), device="cpu")


def test_cross_encoder_path_reranks_by_model_score(minilm_cross_encoder):
    reranker = CrossEncoderReranker(minilm_cross_encoder, batch_size=2)
    hits = candidate_hits()
    direct = minilm_cross_encoder.predict([(QUERY, h.text) for h in hits])
    out = reranker.rerank(QUERY, hits, k=3)
    assert [h.id for h in out] == [hits[i].id for i in np.argsort(-direct)[:3]]
    assert [h.rank for h in out] == [1, 2, 3]
    assert out[0].score == pytest.approx(float(direct.max()), abs=1e-5)
    assert reranker.last_latency_s > 0 and len(reranker.latencies_) == 1


def test_min_rerank_score_can_return_nothing(minilm_cross_encoder):
    reranker = CrossEncoderReranker(minilm_cross_encoder, min_rerank_score=1e9)
    assert reranker.rerank(QUERY, candidate_hits(), k=3) == []
    ordered = reranker.order(QUERY, candidate_hits(), k=3)      # the same ranking, no cut yet
    assert len(ordered) == 3 and reranker.cut(ordered) == []
    floor = ordered[1].score
    assert reranker.with_settings(min_rerank_score=floor).cut(ordered) == ordered[:2]


def test_window_scorer_is_the_max_over_windows():
    text = " ".join(["filler"] * 120) + " Enterprise annual contracts carry a 14-day refund window."
    scorer = WindowScorer(Encoder(), size=50, overlap=25)
    ws = windows(text, 50, 25)
    enc = scorer.encoder
    expected = float((enc.encode_passages(ws) @ enc.encode_queries([QUERY])[0]).max())
    assert scorer.predict([(QUERY, text)])[0] == pytest.approx(expected, abs=1e-6)


def test_offline_reranker_ranks_the_answer_first():
    out = CrossEncoderReranker().rerank(QUERY, candidate_hits(), k=2)
    assert out[0].id == "p0"


def test_windows_cover_the_text():
    text = " ".join(f"w{i}" for i in range(230))
    ws = windows(text, 100, 50)
    assert [w.split()[0] for w in ws] == ["w0", "w50", "w100", "w150"] and ws[-1].endswith("w229")
    assert windows("short text", 100, 50) == ["short text"]
    with pytest.raises(ValueError, match="overlap"):
        windows(text, 10, 10)


def test_bad_k():
    with pytest.raises(ValueError, match="k must be"):
        CrossEncoderReranker().rerank(QUERY, candidate_hits(), k=0)
