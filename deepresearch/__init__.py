"""deepresearch: a local-first deep-research CLI with a long-term knowledge base."""

__version__ = "0.1.0"
