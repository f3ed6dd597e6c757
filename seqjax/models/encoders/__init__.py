"""The encoder-only kinds, each registered by its module: transformer_encoder, electra."""
