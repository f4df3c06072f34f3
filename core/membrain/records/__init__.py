"""The record store: typed records over a backend, the one door of every mutation.

See :mod:`membrain.records.store` (messages, facts, entities, audit, erasure),
:mod:`membrain.records.filters` (which facts a read returns), :mod:`membrain.records.tree`
(the entity tree's records) and :mod:`membrain.records.derived` (keeping derived indexes in step).
"""

from membrain.records.derived import LexicalSync
from membrain.records.filters import FactFilter, is_current
from membrain.records.store import RecordStore, ScoredFact
from membrain.records.tree import TreeNode

__all__ = ["FactFilter", "LexicalSync", "RecordStore", "ScoredFact", "TreeNode", "is_current"]
