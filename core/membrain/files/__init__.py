"""Memories and conversations as files: conversation loaders, export and import."""
