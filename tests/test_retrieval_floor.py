"""Retrieval regression test: CI fails when dense recall@10 on the help-centre dev split
drops below the floor recorded in data/results/retrieval_floors.json (chapter 4 runs the same
check)."""

from ragbook import Encoder
from ragbook.datasets import recorded
from ragbook.dense import DenseIndex
from ragbook.evaluate import evaluate, retrieve_run

FLOORS = recorded("retrieval_floors")


def test_dense_recall_at_10_on_dev_stays_above_the_floor(hc, hc_chunks):
    floor = FLOORS["helpcentre_dev_dense_recall@10"]
    encoder = Encoder()
    assert encoder.fingerprint == floor["encoder"], "the floor was recorded for another encoder"
    index = DenseIndex(encoder).build(hc_chunks)
    dev = [q for q in hc.split("dev") if q.gold]
    recall = evaluate(hc.qrels("dev"),
                      retrieve_run(index, [(q.id, q.standalone) for q in dev], k=10), "recall@10")
    assert recall >= floor["value"], (f"recall@10 fell to {recall:.3f}, "
                                      f"below the floor {floor['value']}")
