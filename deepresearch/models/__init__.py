"""Local models: chat (GGUF in-process or OpenAI-compatible HTTP), embeddings, extraction."""
