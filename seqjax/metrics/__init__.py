"""Generation metrics: BLEU (sacrebleu on text; jittable on ids), ROUGE-1/2/L, perplexity."""

from seqjax.metrics.bleu import bleu_from_statistics, corpus_bleu, corpus_bleu_ids, sentence_bleu_ids
from seqjax.metrics.ngrams import ngram_statistics
from seqjax.metrics.perplexity import perplexity, word_perplexity
from seqjax.metrics.rouge import rouge, rouge_l, rouge_l_ids, rouge_n, rouge_n_ids, rouge_tokens

__all__ = [
    "bleu_from_statistics",
    "corpus_bleu",
    "corpus_bleu_ids",
    "ngram_statistics",
    "perplexity",
    "rouge",
    "rouge_l",
    "rouge_l_ids",
    "rouge_n",
    "rouge_n_ids",
    "rouge_tokens",
    "sentence_bleu_ids",
    "word_perplexity",
]
