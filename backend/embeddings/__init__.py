"""Embeddings above the engine: query and passage prefixes, windows for texts longer than the
encoder's, and concurrent requests combined into one run of the encoder."""
