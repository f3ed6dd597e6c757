"""The encoder-decoder kinds, each registered by its module: rnn_seq2seq, attention_seq2seq
(`rnn_attention`), transformer_seq2seq."""
