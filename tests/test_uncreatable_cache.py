"""An embedding cache folder that cannot be created (here: under a regular file) warns once
and runs uncached; it never stops an index build (issue 36, item 6)."""
import numpy as np
import pytest

from ragbook.embeddings import Encoder


def test_an_uncreatable_cache_folder_warns_and_embeds_uncached(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("RAGBOOK_CACHE", str(blocker / "cache"))
    encoder = Encoder()
    with pytest.warns(UserWarning, match=r"embedding cache folder cannot be created.*"
                                         r"RAGBOOK_CACHE"):
        vectors = encoder.encode_passages(["refunds take 14 days", "plans renew monthly"])
    assert vectors.shape[0] == 2 and np.isfinite(vectors).all()
    assert encoder.cache_hits == 0
    again = encoder.encode_passages(["refunds take 14 days"])   # still uncached, no second failure
    assert np.allclose(again[0], vectors[0], atol=1e-5)
