"""Pretrained checkpoints in and out: Hugging Face GPT-2 and Llama directories as seqjax runs.

`import_checkpoint(CHECKPOINT_DIR, RUN)` (`seqjax import-hf`) writes a run from a checkpoint
directory; `export_run(RUN, DIR)` (`seqjax export-hf`) writes one back. One module per family
(`gpt2`, `llama`) holds its whole mapping, as a table of tensors (`mapping.Tensor`); the
tokenizer is the checkpoint's own (`seqjax.data.tokenizers.pretrained`).
"""

from seqjax.pretrained.exporting import export_run
from seqjax.pretrained.families import FAMILIES
from seqjax.pretrained.importing import import_checkpoint

__all__ = ["FAMILIES", "export_run", "import_checkpoint"]
