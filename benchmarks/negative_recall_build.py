"""Negative-recall build: the store, the targets, the operations and their checks.

``build`` ingests each conversation, chooses its targets and fills the deleted, isolation and
LangGraph store scopes; ``name_targets`` names what each operation will take away;
``prepare_reads`` writes what some reads show of a target before the operations (a profile
entry citing it, a dispute);
``apply_operations`` forgets, supersedes, purges, rejects and deletes (all or some of them) and
``check_operations`` checks that each had its effect; ``erasures`` foresees what the purge will
erase, ``kept_corpus`` is what a purged text's needle must avoid and ``choose_needles`` picks
the needles before the purge. The design is described in ``benchmarks.negative_recall``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from rich.console import Console

from benchmarks.locomo_retrieval import progress_bar
from benchmarks.negative_recall_probes import needle
from benchmarks.negative_recall_targets import (
    OPERATIONS,
    PROFILE_TOPIC,
    ConversationSetup,
    StoreTarget,
    Target,
    collapse,
    keywords,
    queries_for,
    without_times,
)
from langchain_membrain.langgraph import MembrainStore
from membrain import Memory
from membrain.api.models import Fact, FactStatus, Message, Scope, Trust
from membrain.api.profile import MAX_PROFILE_TEXT
from membrain.background import BackgroundWriter
from membrain.files.loaders import Conversation
from membrain.knowledge.profiles import timeless
from membrain.records.journal import without_erased
from membrain.temporal import plain_text

_MIN_WORDS = 5
_STORE_GROUPS = ("supersede", "delete")
"""Operations of the LangGraph store items: overwrite, delete."""
_BENCH_REASON = "negative-recall benchmark"
_REVIEWER = "reviewer:negative-recall"


# -- setup -------------------------------------------------------------------------------------
def scopes_for(name: str) -> ConversationSetup:
    dataset = f"neg-{name}"
    return ConversationSetup(
        name=name,
        main=Scope(dataset=dataset, task="bench"),
        deleted=Scope(dataset=dataset, task="bench-deleted"),
        other_dataset=Scope(dataset=f"{dataset}-iso", task="bench"),
        other_task=Scope(dataset=dataset, task="bench-iso"),
        store_scope=Scope(dataset=dataset, task="bench-store"),
        namespace=(dataset, "bench-store"),
    )


def eligible_facts(mem: Memory, scope: Scope) -> tuple[list[Fact], dict[str, Message]]:
    """Candidate targets, in id order, and the scope's messages by stored id."""
    messages = {m.id: m.message for m in mem.messages(scope=scope)}
    every = mem.facts(scope=scope, include_inactive=True)
    plains = [collapse(plain_text(f.text)).lower() for f in every]
    counts: dict[str, int] = {}
    for p in plains:
        counts[p] = counts.get(p, 0) + 1
    joined = "\n".join(plains)
    out = []
    for fact, plain in zip(every, plains, strict=True):
        if fact.status is not FactStatus.ACTIVE or fact.trust is Trust.DISPUTED:
            continue
        if not all(s in messages for s in fact.sources) or counts[plain] != 1:
            continue
        if joined.count(plain) != 1 or len(without_times(plain).split()) < _MIN_WORDS:
            continue
        out.append(fact)
    return sorted(out, key=lambda f: f.id), messages


def reversed_words(message: Message) -> str:
    text = message.text.strip() or (message.caption or "").strip()
    return " ".join(reversed(text.split()))


def build(
    mem: Memory,
    store: MembrainStore,
    writer: BackgroundWriter,
    conversations: Sequence[Conversation],
    targets: int,
    err: Console,
) -> tuple[list[ConversationSetup], dict[str, Any]]:
    """Ingest, choose the targets, fill the deleted, isolation and store scopes."""
    setups: list[ConversationSetup] = []
    ingest: dict[str, Any] = {"messages": 0, "facts": {}, "extraction_errors": 0}
    turns = sum(len(c.messages) for c in conversations)
    with progress_bar(err) as progress:
        task = progress.add_task("ingest", total=turns)
        for conv in conversations:
            setup = scopes_for(str(conv.name))
            progress.update(task, description=f"ingest {setup.name}")
            added = mem.add(
                conv.messages, scope=setup.main, on_progress=lambda n: progress.advance(task, n)
            )
            ingest["messages"] += added.messages_stored
            ingest["extraction_errors"] += len(added.errors)
            setups.append(setup)
        progress.update(task, completed=turns)
    groups = (*OPERATIONS, *(f"store-{g}" for g in _STORE_GROUPS))
    for conv, setup in zip(conversations, setups, strict=True):
        names = conv.speakers
        candidates, messages = eligible_facts(mem, setup.main)
        ingest["facts"][setup.name] = len(mem.facts(scope=setup.main))
        used: set[str] = set()
        picked: dict[str, list[Fact]] = {g: [] for g in groups}
        turn = 0
        for fact in candidates:
            if all(len(v) >= targets for v in picked.values()):
                break
            if used & set(fact.sources):
                continue
            while len(picked[groups[turn % len(groups)]]) >= targets:
                turn += 1
            picked[groups[turn % len(groups)]].append(fact)
            used.update(fact.sources)
            turn += 1
        for operation in OPERATIONS:
            for fact in picked[operation]:
                sources = tuple(fact.sources)
                first = messages[sources[0]]
                setup.targets.append(
                    Target(
                        operation=operation,
                        conversation=setup.name,
                        scope=setup.main,
                        fact_id=fact.id,
                        text=fact.text,
                        sources=sources,
                        cited=tuple(messages[s].source_id or s for s in sources),
                        message_text=first.text or first.caption or "",
                        speaker=first.speaker,
                        queries=queries_for(fact.text, operation, names),
                    )
                )
        # the deleted scope: copies of the delete targets' messages; its facts are the targets
        main_delete = [t for t in setup.targets if t.operation == "delete"]
        copies = [
            messages[s].model_copy(update={"id": None}) for t in main_delete for s in t.sources
        ]
        if copies:
            mem.add(copies, scope=setup.deleted)
        setup.targets = [t for t in setup.targets if t.operation != "delete"]
        for original in main_delete:
            derived = mem.facts(scope=setup.deleted, derived_from=list(original.cited))
            if not derived:
                continue
            plain = collapse(plain_text(original.text))
            fact = next(
                (f for f in derived if collapse(plain_text(f.text)) == plain),
                sorted(derived, key=lambda f: f.id)[0],
            )
            setup.targets.append(
                Target(
                    operation="delete",
                    conversation=setup.name,
                    scope=setup.deleted,
                    fact_id=fact.id,
                    text=fact.text,
                    sources=tuple(fact.sources),
                    cited=original.cited,
                    message_text=original.message_text,
                    speaker=original.speaker,
                    queries=queries_for(fact.text, "delete", names),
                )
            )
        # isolation scopes: the same words, in reverse order, under other keys
        isolated = [
            Message(
                speaker=messages[s].speaker,
                text=reversed_words(messages[s]),
                timestamp=messages[s].timestamp,
                source_id=f"iso-{messages[s].source_id or s}",
            )
            for t in (*setup.targets, *main_delete)
            if t.scope == setup.main
            for s in t.sources
            if reversed_words(messages[s])
        ]
        for scope in (setup.other_dataset, setup.other_task):
            if isolated:
                mem.add(isolated, scope=scope)
        # the LangGraph store: items whose values are target messages
        for group in _STORE_GROUPS:
            for i, fact in enumerate(picked[f"store-{group}"]):
                message = messages[fact.sources[0]]
                old = (message.text or message.caption or "").strip()
                key = f"{group}-{i}"
                new = f"Note {key} was replaced; the earlier entry no longer applies."
                store.put(setup.namespace, key, {"text": old})
                setup.store_targets.append(
                    StoreTarget(
                        operation=group,
                        conversation=setup.name,
                        namespace=setup.namespace,
                        scope=setup.store_scope,
                        key=key,
                        old_text=old,
                        new_text=new if group == "supersede" else None,
                        queries=queries_for(old, group, names),
                    )
                )
        setup.controls = [t.message_text for t in setup.targets if t.operation == "forget"]
    writer.flush()
    for setup in setups:
        stored = {m.message.text: m.message for m in mem.messages(scope=setup.store_scope)}
        for item in setup.store_targets:
            source = stored.get(item.old_text)
            if source is None or not source.source_id:
                continue
            item.source_id = source.source_id
            derived = mem.facts(
                scope=setup.store_scope, include_inactive=True, derived_from=[item.source_id]
            )
            item.fact_ids = {f.id for f in derived}
    return setups, ingest


def prepare_reads(mem: Memory, setup: ConversationSetup) -> None:
    """Before the operations, what some reads show of each target: a profile entry citing it
    (its text, times left out), and a dispute of each ``reject`` target (the operation then
    rejects it) and of each ``delete`` target (its scope's review queue is not empty).

    Run after "found before", before the control probes: they see all of it.
    """
    for n, target in enumerate(setup.targets):
        if target.skipped is not None:
            continue
        target.profile = f"{target.operation}_{n}"
        mem.profile_put(
            PROFILE_TOPIC,
            target.profile,
            timeless(target.text)[:MAX_PROFILE_TEXT],
            scope=target.scope,
            facts=[target.fact_id],
            by=_REVIEWER,
            reason=_BENCH_REASON,
        )
        if target.operation in ("reject", "delete"):
            disputed = mem.dispute(
                [target.fact_id], scope=target.scope, reason=_BENCH_REASON, by=_REVIEWER
            )
            target.review = disputed.id


# -- operations --------------------------------------------------------------------------------
def name_targets(mem: Memory, setup: ConversationSetup) -> None:
    """Name what each operation will take away, before any runs: none of it may come back.

    Every target names its fact; a purge also every fact derived from its source messages and
    those messages; a delete every fact and message of the deleted scope.
    """
    purge = [t for t in setup.targets if t.operation == "purge"]
    every = mem.facts(scope=setup.main, include_inactive=True) if purge else []
    doomed_facts = {f.id for f in mem.facts(scope=setup.deleted, include_inactive=True)}
    doomed = mem.messages(scope=setup.deleted)
    for target in setup.targets:
        target.fact_ids = {target.fact_id}
        if target.operation == "purge":
            sources = set(target.sources)
            target.fact_ids |= {f.id for f in every if set(f.sources) & sources}
            target.message_ids = sources
            target.source_ids = set(target.cited)
        elif target.operation == "delete":
            target.fact_ids = set(doomed_facts)
            target.message_ids = {m.id for m in doomed}
            target.source_ids = {m.message.source_id for m in doomed if m.message.source_id}


def apply_operations(
    mem: Memory,
    store: MembrainStore,
    writer: BackgroundWriter,
    setup: ConversationSetup,
    operations: Collection[str] = OPERATIONS,
) -> list[str]:
    """Apply ``operations`` (store items' too) to targets named by ``name_targets``.

    Returns what did not have its effect that only the call tells (the purge report).
    """
    problems: list[str] = []
    scope = setup.main
    by_op: dict[str, list[Target]] = {op: [] for op in OPERATIONS}
    for target in setup.targets:
        if target.operation in operations:
            by_op[target.operation].append(target)

    forget = by_op["forget"]
    if forget:
        mem.forget([t.fact_id for t in forget], scope=scope, reason=_BENCH_REASON)

    supersede = by_op["supersede"]
    if supersede:
        last = max(m.message.timestamp for m in mem.messages(scope=scope))
        replacements = []
        for i, target in enumerate(supersede):
            words = keywords(collapse(plain_text(target.text)), ()) or "that"
            replacements.append(
                Message(
                    speaker=target.speaker,
                    text=f"Correction: that is no longer true. Forget about {words}.",
                    timestamp=last + timedelta(days=1, minutes=i),
                    source_id=f"neg-supersede-{i}",
                )
            )
        mem.add(replacements, scope=scope)
        for i, target in enumerate(supersede):
            new = [f.id for f in mem.facts(scope=scope, derived_from=[f"neg-supersede-{i}"])]
            if not new:
                target.skipped = "the replacement message gave no fact"
                continue
            mem.supersede(target.fact_id, new, scope=scope, reason=_BENCH_REASON)

    purge = by_op["purge"]
    if purge:
        result = mem.purge(
            [t.fact_id for t in purge], scope=scope, messages=True, reason=_BENCH_REASON
        )
        named_facts = set().union(*(t.fact_ids for t in purge))
        named_messages = set().union(*(t.message_ids for t in purge))
        if set(result.fact_ids) != named_facts or set(result.message_ids) != named_messages:
            problems.append(
                f"{setup.name}: purge erased {len(result.fact_ids)} facts and "
                f"{len(result.message_ids)} messages; expected {len(named_facts)} and "
                f"{len(named_messages)}"
            )

    for target in by_op["reject"]:
        if not target.review:  # disputed by ``prepare_reads`` (the dispute, then this)
            disputed = mem.dispute(
                [target.fact_id], scope=scope, reason=_BENCH_REASON, by=_REVIEWER
            )
            target.review = disputed.id
        mem.resolve(target.review, scope=scope, accept=False, by=_REVIEWER)

    if by_op["delete"]:
        mem.delete_scope(setup.deleted)

    for item in setup.store_targets:
        if item.operation not in operations:
            continue
        if item.new_text is None:
            store.delete(item.namespace, item.key)
        else:
            store.put(item.namespace, item.key, {"text": item.new_text})
    writer.flush()
    return problems


def check_operations(mem: Memory, setup: ConversationSetup) -> list[str]:
    """What did not have its effect once every operation ran (empty: all did)."""
    problems: list[str] = []
    scope = setup.main
    expected = {
        "forget": FactStatus.FORGOTTEN,
        "supersede": FactStatus.SUPERSEDED,
        "reject": FactStatus.RETRACTED,
    }
    status = {f.id: f.status for f in mem.facts(scope=scope, include_inactive=True)}
    for target in setup.targets:
        want = expected.get(target.operation)
        if target.skipped is not None:
            continue
        if want is not None and status.get(target.fact_id) is not want:
            problems.append(
                f"{setup.name}: {target.operation} target {target.fact_id} is "
                f"{status.get(target.fact_id)}, not {want.value}"
            )
        if target.operation == "purge" and target.fact_ids & set(status):
            problems.append(f"{setup.name}: purged facts of {target.fact_id} are still stored")
    if mem.facts(scope=setup.deleted, include_inactive=True) or mem.messages(scope=setup.deleted):
        problems.append(f"{setup.name}: the deleted scope still holds records")
    store_status = {
        f.id: f.status for f in mem.facts(scope=setup.store_scope, include_inactive=True)
    }
    for item in setup.store_targets:
        active = [i for i in item.fact_ids if store_status.get(i) is FactStatus.ACTIVE]
        if active:
            problems.append(
                f"{setup.name}: store item {item.key}: {len(active)} facts of its previous "
                "value are still active"
            )
    return problems


@dataclass
class Erasure:
    """What a purge of some targets will erase in one scope (as ``Memory.purge`` decides it)."""

    facts: set[str] = field(default_factory=set)
    messages: set[str] = field(default_factory=set)
    entities: dict[str, set[str]] = field(default_factory=dict)
    """Entities no fact but erased ones names (participants aside), with those facts."""


def erasures(mem: Memory, purged: Sequence[Target]) -> dict[Scope, Erasure]:
    """What purging ``purged`` (named by ``name_targets``, not purged yet) will erase."""
    out: dict[Scope, Erasure] = {}
    for target in purged:
        erasure = out.setdefault(target.scope, Erasure())
        erasure.facts |= target.fact_ids
        erasure.messages |= target.message_ids
    for scope, erasure in out.items():
        naming: dict[str, set[str]] = {}
        for fact in mem.facts(scope=scope, include_inactive=True):
            for entity in fact.entity_ids:
                naming.setdefault(entity, set()).add(fact.id)
        erasure.entities = {
            e.id: naming[e.id]
            for e in mem.entities(scope=scope)
            if not e.participant and naming.get(e.id) and naming[e.id] <= erasure.facts
        }
    return out


def kept_corpus(
    mem: Memory,
    setups: Sequence[ConversationSetup],
    deleted_texts: Sequence[str],
    erased: dict[Scope, Erasure] | None = None,
) -> str:
    """Every text kept (and every deleted scope's), lowercase: needles must avoid it.

    ``erased``: what a purge still to come will erase, left out (see ``stored_texts``).
    """
    texts = list(deleted_texts)
    for setup in setups:
        for scope in (setup.main, setup.other_dataset, setup.other_task, setup.store_scope):
            texts.extend(stored_texts(mem, scope, (erased or {}).get(scope)))
        for item in setup.store_targets:
            texts.extend(t for t in (item.old_text, item.new_text) if t)
    return "\n".join(texts).lower()


def stored_texts(mem: Memory, scope: Scope, erased: Erasure | None = None) -> list[str]:
    """Every text ``scope`` holds: messages, facts (any status, also plain), entities, the
    profile's versions.

    With ``erased``, as the purge will leave it: those records left out, and entity
    descriptions chained again without what the erased facts taught them.
    """
    erased = erased or Erasure()
    texts: list[str] = []
    for m in mem.messages(scope=scope):
        if m.id not in erased.messages:
            texts.extend(t for t in (m.message.text, m.message.caption) if t)
    for f in mem.facts(scope=scope, include_inactive=True):
        if f.id not in erased.facts:
            texts.extend((f.text, plain_text(f.text)))
    for e in mem.entities(scope=scope):
        if e.id not in erased.entities:
            versions = without_erased(e.versions, erased.facts)
            texts.extend((e.name, *e.aliases, *(v.description for v in versions)))
    # A purge deletes the profile versions citing its facts (their text summarises them).
    texts.extend(
        p.text for p in mem.store.profile_versions(scope) if not set(p.fact_ids) & erased.facts
    )
    return texts


def choose_needles(
    mem: Memory, purged: Sequence[Target], erased: dict[Scope, Erasure], kept: str
) -> set[tuple[str, str]]:
    """Give each purge target its needles: distinctive texts of what its purge erases.

    From its message, its fact (outside entity brackets), and the entities its facts name that
    the purge erases (name, aliases) or whose description versions it takes out. Returns the
    targets (scope key, fact id) with a needle from entity text: only their purge can show in
    the entities listing.
    """
    entities = {scope: mem.entities(scope=scope) for scope in erased}
    in_entities: set[tuple[str, str]] = set()
    for target in purged:
        found = [
            needle(target.message_text, kept),
            needle(target.text, kept, outside_brackets=True),
        ]
        dropped = erased[target.scope].entities
        texts: list[str] = []
        for entity in entities[target.scope]:
            if dropped.get(entity.id, set()) & target.fact_ids:
                texts += [entity.name, *entity.aliases]
            texts += [v.description for v in entity.versions if set(v.fact_ids) & target.fact_ids]
        from_entities = [n for n in (needle(t, kept) for t in texts) if n]
        if from_entities:
            in_entities.add((target.scope.key, target.fact_id))
        target.needles = tuple(dict.fromkeys(n for n in (*found, *from_entities) if n))
    return in_entities
