"""The model engines: chat (llama.cpp for GGUF files on a CPU, transformers for the rest) and
embeddings (transformers), the embedded weights they load, and the one place that decides
which engine runs what (``selection``). Engines turn token ids into token ids or vectors and
know nothing of the service's API."""
