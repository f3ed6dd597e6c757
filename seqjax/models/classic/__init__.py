"""The classic language models, each registered by its module: the fixed-window neural LM
(`nnlm`) and the counted Kneser-Ney n-gram model (`ngram`)."""
