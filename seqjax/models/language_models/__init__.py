"""The language-model kinds, each registered by its module: rnn, transformer, bilm, rnn_vae."""
