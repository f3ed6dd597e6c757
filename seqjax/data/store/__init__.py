"""The token store: a corpus tokenized once into memory-mapped arrays (`token_store`), prepared in
a streaming pass into a temporary directory and moved into place, and found or prepared again
when its sources change (`prepare`, writing its arrays through `arrays`)."""
