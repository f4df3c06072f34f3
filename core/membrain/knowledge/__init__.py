"""What the memory knows, built over the record store.

Facts built from drafts (:mod:`~membrain.knowledge.facts`), entities resolved
(:mod:`~membrain.knowledge.entities`), the rules of every change of belief and its
audit (:mod:`~membrain.knowledge.ledger`) and the user profile's versions
(:mod:`~membrain.knowledge.profiles`).
"""
