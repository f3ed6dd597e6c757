"""The Transformer's parts: attention (`attention`), its masks (`masks`), position encodings
(`positions`), the block (`blocks`) and the layer stack (`stack`). The whole models built from them
are the kinds in `language_models`, `encoder_decoders` and `encoders`."""
