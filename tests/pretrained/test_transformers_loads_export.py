"""An exported run loads in transformers (`AutoModelForCausalLM.from_pretrained`) and gives the
logits recorded from the original model. Needs torch and transformers: skipped without them
(benchmarks/hf_fixtures.py records the same check in fixtures/export_check.json)."""

import numpy as np
import pytest
from pretrained_helpers import NAMES, expected

from seqjax.pretrained import export_run

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


@pytest.mark.parametrize("name", NAMES)
def test_transformers_loads_the_export_and_computes_the_original_logits(name, imported, tmp_path):
    export_run(str(imported(name)), str(tmp_path / "hf"), echo=lambda _: None)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path / "hf"), dtype=torch.float32).eval()
    want = expected(name)
    with torch.no_grad():
        logits = model(torch.tensor(want["inputs"])).logits.numpy()
    np.testing.assert_allclose(logits, want["logits"], atol=1e-4, rtol=0)
