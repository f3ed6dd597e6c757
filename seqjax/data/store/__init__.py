"""The token store: a corpus tokenized once into memory-mapped arrays (`token_store`), prepared
in a streaming pass (`writing`) into its place, found or made again when its sources change
(`prepare`)."""
