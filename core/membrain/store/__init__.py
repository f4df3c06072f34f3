"""The record store: typed records over a backend, the one door of every mutation.

See :mod:`membrain.store.records` (messages, facts, entities, audit, erasure),
:mod:`membrain.store.filters` (which facts a read returns), :mod:`membrain.store.tree`
(the entity tree's records) and :mod:`membrain.store.derived` (keeping derived indexes in step).
"""

from membrain.store.derived import LexicalSync
from membrain.store.filters import FactFilter
from membrain.store.records import RecordStore, ScoredFact
from membrain.store.tree import TreeNode

__all__ = ["FactFilter", "LexicalSync", "RecordStore", "ScoredFact", "TreeNode"]
