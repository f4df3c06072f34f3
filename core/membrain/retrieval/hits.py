"""Search results as a reader sees them: facts with names, entities and cited messages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from membrain.api.indexing import render_fact
from membrain.api.models import EntityView, Fact, MemoryHit, Scope
from membrain.records import RecordStore

__all__ = ["memory_hits"]


def memory_hits(
    store: RecordStore,
    scope: Scope,
    ranked: Sequence[tuple[Fact, float, dict[str, int]]],  # fact, fused score, path ranks
    reranked: Mapping[str, float] | None = None,
    relevance: Sequence[float] = (),
) -> list[MemoryHit]:
    """One :class:`MemoryHit` per (fact, fused score, path ranks), in one read of each kind.

    ``reranked`` holds the reranker's score per fact id, when it ordered the results;
    ``relevance`` each hit's relevance, in order (0 where not given).
    """
    source_ids = list(dict.fromkeys(s for fact, _, _ in ranked for s in fact.sources))
    messages = {m.id: m.message for m in store.get_messages(scope.without_session(), source_ids)}
    entity_ids = list(dict.fromkeys(e for fact, _, _ in ranked for e in fact.entity_ids))
    views = {
        e.id: EntityView(id=e.id, name=e.name, description=e.description)
        for e in store.get_entities(scope.without_session(), entity_ids)
    }
    hits = []
    for index, (fact, score, paths) in enumerate(ranked):
        names = {
            ref: views[i].name
            for ref, i in zip(fact.entities, fact.entity_ids, strict=True)
            if i in views
        }
        hits.append(
            MemoryHit(
                fact=fact,
                score=score,
                rerank=(reranked or {}).get(fact.id),
                relevance=relevance[index] if index < len(relevance) else 0.0,
                text=render_fact(fact.text, names),
                entities=tuple(views[i] for i in dict.fromkeys(fact.entity_ids) if i in views),
                sources=tuple(messages[s] for s in fact.sources if s in messages),
                paths=paths,
            )
        )
    return hits
