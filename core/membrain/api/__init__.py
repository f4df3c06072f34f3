"""The ground floor: what every caller of a memory imports, and no engine.

Records (:mod:`~membrain.api.models`, :mod:`~membrain.api.audit`,
:mod:`~membrain.api.results`), scopes, errors, the operations table and each
operation's request (:mod:`~membrain.api.operations`, :mod:`~membrain.api.requests`),
the surfaces made from them (:mod:`~membrain.api.surface`) and the checks of every
input. A client of a served memory (:mod:`membrain.remote`) imports only these.
"""
