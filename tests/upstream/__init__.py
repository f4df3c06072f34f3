"""The frameworks' own published test suites, run against MemBrain's adapters (``runner``)."""
