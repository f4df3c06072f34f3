"""LangChain surfaces for MemBrain."""
