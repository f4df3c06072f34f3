"""Answer follow-up: a retrieved question brings the reply that answered it.

Conversations state much of what matters as replies: "What kinda jobs are you thinking of?" -
"I'm keen on counseling or working in mental health." A question is often the fact that matches a
later question best (it shares its words), while the reply holds the answer. So when a question
fact ranks, the facts of the next message of the conversation (the earliest facts stated after
it, within ``window``) are placed right after it, with its score. A fact asks when it holds a
question anywhere, not only at its end: chat turns often ask and go on ("What are their names?
Pets sure do bring joy!").

On the LoCoMo dev split (2 conversations, offline) this raised recall@10 of the fused paths from
73.4 to 77.5 (measured while building it); counting questions inside a fact, not only at its end,
raised ``expand`` recall@10 on the whole split from 76.2 to 77.0.
``benchmarks/locomo_retrieval.py --ablate`` reports it as the ``answers`` row.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from membrain.api.models import Fact, Scope
from membrain.records import FactFilter, RecordStore

__all__ = ["WINDOW", "asks", "replies", "with_answers"]

WINDOW = timedelta(hours=1)
"""How long after a question its reply may come."""
_READ = 16
_TICK = timedelta(microseconds=1)


def _any(fact: Fact) -> bool:
    return True


def asks(text: str) -> bool:
    """The text asks something: "Ah, adorable! What are their names? Pets bring joy!" does."""
    return "?" in text


def replies(
    store: RecordStore,
    scope: Scope,
    said: datetime,
    sources: Collection[str],
    *,
    window: timedelta = WINDOW,
    view: FactFilter | None = None,
    admits: Callable[[Fact], bool] | None = None,
) -> list[Fact]:
    """The facts of the first message stated after ``said`` within ``window``.

    ``sources`` are the asking messages (their own facts are no reply); ``view`` selects the
    facts looked at (default: active), ``admits`` has the last word.
    """
    accept = admits or _any
    end = said + window
    while True:
        where = replace(view or FactFilter(), stated_after=said, stated_before=end)
        later = store.first_facts(scope, where, limit=_READ)
        if len(later) < _READ or not later:
            break
        # A full read may have missed earlier facts (the store returns them in id order, not in
        # time order): read again up to the earliest found, until a read is not full.
        earliest = min(f.stated_at for f in later)
        if earliest + _TICK >= end:
            break
        end = earliest + _TICK
    later = [f for f in later if not set(f.sources) & set(sources) and accept(f)]
    if not later:
        return []
    first = min(f.stated_at for f in later)
    return sorted((f for f in later if f.stated_at == first), key=lambda f: f.id)


def with_answers(
    store: RecordStore,
    scope: Scope,
    ranked: Sequence[tuple[Fact, float, dict[str, int]]],
    *,
    k: int,
    window: timedelta = WINDOW,
    view: FactFilter | None = None,
    admits: Callable[[Fact], bool] | None = None,
) -> list[tuple[Fact, float, dict[str, int]]]:
    """``ranked`` with each question's reply inserted after it, cut to ``k``.

    Replies are looked up among the facts ``view`` selects (default: active) that ``admits``
    accepts (the search's own view and rule: an ``as_of`` search never gains a later fact).

    A reply found this way records ``{"answers": <rank of the question>}`` among its paths (and
    keeps its own paths when it was ranked too).
    """
    out: list[tuple[Fact, float, dict[str, int]]] = []
    placed: dict[str, int] = {}
    own = {fact.id: (score, paths) for fact, score, paths in ranked}
    for rank, (fact, score, paths) in enumerate(ranked, 1):
        if len(out) >= k:
            break
        if fact.id not in placed:
            placed[fact.id] = len(out)
            out.append((fact, score, paths))
        if not asks(fact.text):
            continue
        found = replies(
            store, scope, fact.stated_at, fact.sources, window=window, view=view, admits=admits
        )
        for reply in found:
            if reply.id in placed or len(out) >= k:
                continue
            reply_paths = {**own.get(reply.id, (0.0, {}))[1], "answers": rank}
            placed[reply.id] = len(out)
            out.append((reply, score, reply_paths))
    return out[:k]
