"""LlamaIndex surfaces for MemBrain."""
