"""The store side of ``benchmarks.fault_injection``: workload, operations, kill points, checks.

* :class:`Workload`, :func:`build_base`: the messages every trial starts from (stored and
  extracted in two scopes, each with a few messages of its own) and the ones an ``add``
  trial adds.
* :data:`OPERATIONS`, :func:`make_plan`, :func:`prepare`, :func:`run_operation`,
  :func:`resume_operation`: the rows (named after the operations of
  :data:`membrain.api.operations.OPERATIONS` that change the store), their seeded parameters, the
  state some start from, and how an interrupted one is re-run.
* :class:`KillSwitch`, :func:`kill_points`, :func:`run_child`: every Qdrant write, compaction
  step and tantivy commit is a numbered kill point; the switch counts them (reference run) or
  SIGKILLs its own process when the chosen one is reached (child process).
* :func:`snapshot`, :func:`compare`: what the store holds and how it differs from the reference.
* :class:`Probe`, :func:`served_inactive`, :func:`lexical_problems`, :func:`found_by_boolean`:
  whether a read serves a fact that is not active, and whether the boolean path's index agrees
  with the store.
* :func:`audited_changes`, :func:`unaudited_changes`: the changes an operation made and those
  without an audit event.
* :class:`DiskProbe`, :func:`disk_probes`, :func:`text_left`: the words an erasure must remove
  from every file, as text and as tantivy terms (:func:`fst_chain`).
* :func:`damage`: the damaged-file cases.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import shutil
import signal
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import tantivy

from membrain import Memory, Scope
from membrain.api.audit import AuditAction, ReviewItem, ReviewKind
from membrain.api.errors import ConflictError, NotFoundError
from membrain.api.models import Fact, FactStatus, Message, MessageStatus, StoredMessage
from membrain.api.path_names import BOOLEAN
from membrain.backends import edge
from membrain.backends.edge import EdgeBackend
from membrain.backends.lexical import LexicalIndex
from membrain.files.transfer import export_scope, import_scope
from membrain.ingest import message_id
from membrain.temporal import plain_text
from membrain.testing import HashingEncoder, file_extents

MAIN = Scope(dataset="u1", task="bench")
OTHER = Scope(dataset="u2", task="bench")
SCOPES = (MAIN, OTHER)
COPY = Scope(dataset="u3", task="bench")
"""Empty in the base: an ``import`` trial loads an export of one of the two scopes into it."""
CHECKED = (*SCOPES, COPY)
"""The scopes a snapshot reads and the checks look at."""
OPERATIONS = (
    "add",
    "extract_pending",
    "retry_failed",
    "dismiss_failed",
    "forget",
    "supersede",
    "update",
    "confirm",
    "dispute",
    "resolve",
    "profile_put",
    "profile_forget",
    "purge",
    "apply_retention",
    "delete_scope",
    "delete_dataset",
    "expire",
    "extend_expiry",
    "optimize",
    "import",
    "purge_receipt",
)
"""The rows, by the name of the operation of :data:`membrain.api.operations.OPERATIONS` each kills
(every one that changes the store), in the table's order; then ``import``, which is no operation
of a memory (:func:`membrain.files.transfer.import_scope`), and ``purge_receipt``, a purge whose
erasure receipts are checked too (:func:`receipt_problems`)."""
RUNS = {"purge_receipt": "purge"}
"""The operation a row runs, when it is not the row's own name."""
LABELS = {"add": "ingest", "delete_scope": "delete", "expire": "expiry-sweep"}
"""How the report shows a row whose name there differs from the operation's."""
ALIASES = {label: name for name, label in LABELS.items()}
"""Row names ``--ops`` and ``--replay`` also take: the labels."""
ERASURES = ("purge", "apply_retention", "delete_scope", "delete_dataset")
"""Operations whose content must leave the store's files: their trials scan them."""
PREPARED = (
    "extract_pending",
    "retry_failed",
    "dismiss_failed",
    "confirm",
    "resolve",
    "expire",
    "extend_expiry",
)
"""Operations whose trials start from the base brought further first (:func:`prepare`):
messages stored without extraction, messages whose extraction failed, open disputes, facts
past their expiry."""
REVIEWER = "reviewer:ana"
BATCH_SIZE = 3
"""Messages per extraction batch: an ``add`` of a few messages runs several batches."""
KILL_LINE = "kill"
MODES = ("fast", "expand")
"""Searched directly by a probe; deep mode runs through ``context`` (its hits and text)."""
PROBES = 3
"""Facts probed per trial when an operation touches more (a deleted scope, an add)."""
DAMAGES = (
    "damaged lexical meta.json",
    "missing lexical .term",
    "zeroed lexical .store",
    "missing lexical folder",
)

_SPEAKERS = ("Sara", "Tom")
_STATEMENTS = (
    "I adopted a beagle named Rex last week.",
    "I moved to Lisbon in May 2023.",
    "My sister Ana works as a nurse at the Riverside hospital.",
    "I started learning the cello in January.",
    "I bought a red tandem bicycle yesterday.",
    "My brother Leo lives in Berlin with his husband Jonas.",
    "Haha, nice!",
    "I ran the Porto half marathon in October 2023.",
    "I teach chemistry at Lincoln High School.",
    "My favourite dish is green papaya salad.",
    "I visited Kyoto with my cousin Mei in April 2022.",
    "I have two tabby cats named Miso and Tofu.",
    "I play chess every Sunday with my neighbour Omar.",
    "Thanks, that sounds great!",
    "I am allergic to peanuts and shellfish.",
    "My daughter Lily turned seven on 3 March 2024.",
    "I sold my old sailboat to a collector from Brighton.",
    "I volunteer at the Oak Street food bank on Fridays.",
    "My grandmother Rosa taught me to bake sourdough bread.",
    "Wow, good luck!",
    "I am training for a climbing trip to Yosemite in June.",
    "My colleague Priya recommended a podcast about volcanoes.",
    "I broke my left wrist skiing in Banff in 2021.",
    "I am reading a novel by Chimamanda Adichie.",
    "I planted tomatoes and basil in the community garden.",
    "My uncle Victor owns a bakery in Marseille.",
    "Sounds fun!",
    "I learned to surf in Biarritz last summer.",
    "I collect vintage film cameras from the 1970s.",
    "My best friend Kwame is getting married in Accra in August.",
    "I switched to a standing desk for my back pain.",
    "I am learning Japanese with an app every morning.",
    "My son Hugo scored two goals in his football match.",
    "Cool, see you then!",
    "I repaired the antique grandfather clock from my aunt Clara.",
    "I saw a humpback whale near Reykjavik in 2022.",
)
# Stored in one scope only (the main one, then the other): the words of these are distinctive,
# so a purge or a deleted scope has words no kept record holds, long enough to be seen as
# tantivy terms too.
_OWN_STATEMENTS = (
    (
        "My great-aunt Philomena keeps beehives near Aberystwyth.",
        "I restored a Wurlitzer jukebox for my uncle's barbershop.",
        "I photographed a kingfisher at the Ballyconnell wetlands.",
        "My cousin Bartholomew is a glassblower in Murano.",
        "I collect Czechoslovakian matchbox labels.",
        "I grow chrysanthemums and snapdragons on my balcony.",
    ),
    (
        "My neighbour Evangelina breeds Lipizzaner horses.",
        "I built a harpsichord from a Sheffield woodworking kit.",
        "I learned calligraphy from a monk in Thessaloniki.",
        "My grandfather Maximilian repaired typewriters in Winnipeg.",
    ),
)


@dataclass(frozen=True, slots=True)
class Workload:
    """What every trial starts from and what an ``add`` trial adds (``extra``).

    Both scopes hold ``base``; the main scope also holds ``main_only`` and the other one
    ``other_only``.
    """

    base: tuple[Message, ...]
    extra: tuple[Message, ...]
    main_only: tuple[Message, ...] = ()
    other_only: tuple[Message, ...] = ()

    def stored(self, scope: Scope) -> list[Message]:
        """The messages the base store holds in ``scope``, in time order."""
        own = self.main_only if scope == MAIN else self.other_only
        return sorted([*self.base, *own], key=lambda m: m.timestamp)


def generate_workload() -> Workload:
    """A fixed two-speaker conversation with one distinct statement (or a filler) per message."""
    start = datetime(2024, 3, 15, 9, 0, tzinfo=UTC)
    messages = [
        Message(
            speaker=_SPEAKERS[i % 2],
            text=text,
            timestamp=start + timedelta(minutes=7 * i),
            source_id=f"m{i:02d}",
        )
        for i, text in enumerate(_STATEMENTS)
    ]
    own = [
        tuple(
            Message(
                speaker=_SPEAKERS[k % 2],
                text=text,
                timestamp=start + timedelta(minutes=7 * (4 * k + 1 + 2 * side) + 3),
                source_id=f"{'ab'[side]}{k:02d}",
            )
            for k, text in enumerate(statements)
        )
        for side, statements in enumerate(_OWN_STATEMENTS)
    ]
    return Workload(tuple(messages[:24]), tuple(messages[24:]), own[0], own[1])


def load_workload(path: Path, count: int) -> Workload:
    """The first ``count`` messages of the file's first conversation, two thirds of them base.

    The 4 messages after them are the main scope's own, the 4 after those the other scope's.
    """
    from membrain.files.loaders import load_conversations

    messages = load_conversations(path)[0].messages[: count + 8]
    taken, rest = messages[:count], messages[count:]
    if len(taken) < 6:
        raise ValueError(f"{path}: need at least 6 messages, got {len(taken)}")
    cut = len(taken) * 2 // 3
    return Workload(tuple(taken[:cut]), tuple(taken[cut:]), tuple(rest[:4]), tuple(rest[4:]))


@contextmanager
def recorded_warnings() -> Iterator[list[warnings.WarningMessage]]:
    """Record warnings instead of showing (or, under pytest, raising) them."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def open_memory(path: Path) -> Memory:
    """The store every process of the benchmark opens (same encoder, same batching)."""
    return Memory(path, dense=HashingEncoder(64), batch_size=BATCH_SIZE)


def copy_store(source: Path, target: Path) -> None:
    """Copy a closed store folder, keeping Qdrant's preallocated files sparse."""
    for path in sorted(source.rglob("*")):
        dest = target / path.relative_to(source)
        if path.is_dir():
            dest.mkdir(parents=True, exist_ok=True)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        with dest.open("wb") as out:
            for offset, chunk in file_extents(path):
                out.seek(offset)
                out.write(chunk)
            out.truncate(path.stat().st_size)


# -- operations -------------------------------------------------------------------------------
Plan = dict[str, Any]
"""An operation's parameters, JSON-able (it is handed to the child process as is)."""


def make_plan(
    op: str, rng: random.Random, active: Sequence[str], workload: Workload, own: Sequence[str] = ()
) -> Plan:
    """Seeded parameters of one trial.

    ``active`` are the main scope's active fact ids, ``own`` those of them extracted from the
    main scope's own messages only (:func:`own_facts`): a purge picks among these.
    """
    if op == "add":
        count = rng.randint(min(3, len(workload.extra)), len(workload.extra))
        again = rng.sample(workload.base, rng.randint(0, 2))  # already stored: skipped
        return {"messages": _dumped([*again, *workload.extra[:count]])}
    if op == "extract_pending":
        count = rng.randint(min(3, len(workload.extra)), len(workload.extra))
        return {"messages": _dumped(workload.extra[:count])}
    if op in ("retry_failed", "dismiss_failed"):
        return plan_failed(op, rng, workload)
    if op == "forget":
        return {"facts": rng.sample(sorted(active), rng.randint(1, 4))}
    if op == "supersede":
        chosen = rng.sample(sorted(active), 2 * rng.randint(1, 3))
        return {"pairs": [chosen[i : i + 2] for i in range(0, len(chosen), 2)]}
    if op == "purge":
        if not own:
            raise ValueError("no fact of the main scope's own messages to purge")
        return {"facts": rng.sample(sorted(own), rng.randint(1, min(3, len(own))))}
    if op == "delete_scope":
        return {"scope": rng.choice([s.dataset for s in SCOPES])}
    if op == "import":
        return _plan_import(rng)
    if op == "update":
        return plan_update(rng, active)
    if op == "delete_dataset":
        return plan_delete_dataset(rng)
    if op == "profile_put":
        return plan_profile_put(rng, active)
    if op == "profile_forget":
        return plan_profile_forget(rng)
    if op in ("confirm", "dispute", "resolve"):
        return plan_review(op, rng, active)
    if op == "apply_retention":
        return plan_retention(rng, workload)
    if op in ("expire", "extend_expiry"):
        return plan_expire(rng, active)
    if op == "optimize":
        return {}
    raise ValueError(f"unknown operation {op!r}")


def _dumped(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [m.model_dump(mode="json", exclude_none=True) for m in messages]


def _plan_import(rng: random.Random) -> Plan:
    """An export of one of the two scopes, loaded into :data:`COPY` (ids derived anew)."""
    return {"source": rng.choice([s.dataset for s in SCOPES])}


def own_facts(state: StoreState, workload: Workload) -> list[str]:
    """Active facts of the main scope whose every source is one of its own messages."""
    own = {m.source_id for m in workload.main_only}
    return sorted(
        i for i in state.active(MAIN) if all(state.messages[s][1] in own for s in state.facts[i][3])
    )


def plan_key(op: str, plan: Plan) -> str:
    """Trials with equal keys share one reference run."""
    return op + json.dumps(plan, sort_keys=True)


def _scope(dataset: str) -> Scope:
    return next(s for s in SCOPES if s.dataset == dataset)


def run_operation(mem: Memory, op: str, plan: Plan) -> None:
    """Run the operation once, as an application would."""
    if op == "add":
        messages = [Message.model_validate(m) for m in plan["messages"]]
        mem.add(messages, scope=MAIN)
    elif op == "extract_pending":
        mem.extract_pending(scope=MAIN)
    elif op == "retry_failed":
        mem.retry_failed(scope=MAIN)
    elif op == "dismiss_failed":
        mem.dismiss_failed(plan["dismiss"], scope=MAIN, by=REVIEWER, reason="unreadable")
    elif op == "forget":
        mem.forget(plan["facts"], scope=MAIN)
    elif op == "supersede":
        for old, new in plan["pairs"]:
            mem.supersede(old, [new], scope=MAIN)
    elif op == "purge":
        mem.purge(plan["facts"], scope=MAIN, messages=True)
    elif op == "delete_scope":
        mem.delete_scope(_scope(plan["scope"]))
    elif op == "import":
        _run_import(mem, plan)
    elif op == "update":
        run_update(mem, plan)
    elif op == "delete_dataset":
        mem.delete_dataset(plan["dataset"])
    elif op == "profile_put":
        run_profile_put(mem, plan)
    elif op == "profile_forget":
        run_profile_forget(mem, plan)
    elif op == "confirm":
        mem.confirm(plan["facts"], scope=MAIN, by=REVIEWER)
    elif op == "dispute":
        mem.dispute(plan["facts"], scope=MAIN, reason=plan["reason"], by=REVIEWER)
    elif op == "resolve":
        resolve_open(mem, plan)
    elif op == "apply_retention":
        run_retention(mem, plan)
    elif op == "expire":
        mem.expire(scope=MAIN, at=datetime.fromisoformat(plan["at"]))
    elif op == "extend_expiry":
        mem.extend_expiry(EXTENDED_TO, fact_ids=plan["facts"], scope=MAIN)
    elif op == "optimize":
        mem.optimize()
    else:
        raise ValueError(f"unknown operation {op!r}")


def _run_import(mem: Memory, plan: Plan) -> None:
    """Export the source scope as JSON Lines and import them into :data:`COPY`.

    Run again after a crash, the same import completes what the killed one began.
    """
    lines = [json.dumps(r) for r in export_scope(mem, _scope(plan["source"]))]
    import_scope(mem, COPY, lines)


def resume_operation(mem: Memory, op: str, plan: Plan) -> str:
    """What an application does after a crash: run the same call again (and extract leftovers).

    A purge run again raises ``NotFoundError`` once its facts are gone: when none is left, that
    answers "done before the crash" (the note returned); else the error is raised. So do an
    update answered ``ConflictError`` (:func:`resume_update`) and a profile entry removed already
    (:func:`resume_profile_forget`).
    """
    if op == "update":
        return resume_update(mem, plan)
    if op == "profile_forget":
        return resume_profile_forget(mem, plan)
    if op == "dismiss_failed":
        return resume_dismiss(mem, plan)
    if op == "dispute":
        return resume_dispute(mem, plan)
    if op == "resolve":
        left = resolve_open(mem, plan)
        done = len(plan["items"]) - left
        return f"resolved again: {done} of its items closed before the crash" if done else ""
    try:
        run_operation(mem, op, plan)
    except NotFoundError:
        if op != "purge" or mem.facts(scope=MAIN, ids=plan["facts"], include_inactive=True):
            raise
        return "purged again: NotFoundError, none of its facts left"
    if op == "add":
        mem.extract_pending(scope=MAIN)
    return ""


# -- extraction, review and retention ---------------------------------------------------------
class FailingExtractor:
    """An extractor whose every extraction fails on the message's content: the message is
    marked ``failed`` (:func:`prepare` opens the store with it)."""

    id = "failing-for-the-benchmark"

    def extract(
        self, target: Sequence[Message], context: Sequence[Message], participants: Sequence[str]
    ) -> Any:
        raise ValueError("this message cannot be read")


def plan_failed(op: str, rng: random.Random, workload: Workload) -> Plan:
    """2-6 new messages whose extraction fails (:func:`prepare`), extracted again
    (``retry_failed``) or 1 or more of them given up (``dismiss_failed``, by stored id)."""
    count = rng.randint(min(2, len(workload.extra)), min(6, len(workload.extra)))
    messages = workload.extra[:count]
    plan: Plan = {"messages": _dumped(messages)}
    if op == "dismiss_failed":
        ids = sorted(message_id(MAIN, m) for m in messages)
        plan["dismiss"] = sorted(rng.sample(ids, rng.randint(1, len(ids))))
    return plan


def plan_review(op: str, rng: random.Random, active: Sequence[str]) -> Plan:
    """``confirm``: 1-4 active facts, 0-2 of them disputed first (one review item each, which
    the confirmation closes); ``dispute``: 1-3 active facts; ``resolve``: 1-2 disputes of 1-2
    facts (opened first), each accepted or rejected (rejected: the facts are retracted)."""
    if op == "confirm":
        facts = rng.sample(sorted(active), rng.randint(1, 4))
        disputed = rng.sample(facts, rng.randint(0, min(2, len(facts))))
        return {"facts": facts, "disputed": [[f] for f in disputed]}
    if op == "dispute":
        return {"facts": rng.sample(sorted(active), rng.randint(1, 3)), "reason": "not what I said"}
    sizes = [rng.randint(1, 2) for _ in range(rng.randint(1, 2))]
    chosen = rng.sample(sorted(active), sum(sizes))
    groups = [chosen[sum(sizes[:i]) : sum(sizes[: i + 1])] for i in range(len(sizes))]
    return {"items": [[group, rng.random() < 0.5] for group in groups]}


def _open_disputes(mem: Memory) -> list[ReviewItem]:
    return [i for i in mem.review_queue(scope=MAIN) if i.kind is ReviewKind.DISPUTE]


def resolve_open(mem: Memory, plan: Plan) -> int:
    """Resolve the plan's items still open (named by their facts); how many were."""
    resolved = 0
    for facts, accept in plan["items"]:
        item = next((i for i in _open_disputes(mem) if set(i.fact_ids) == set(facts)), None)
        if item is not None:
            mem.resolve(item.id, accept=accept, by=REVIEWER, note="checked", scope=MAIN)
            resolved += 1
    return resolved


def resume_dispute(mem: Memory, plan: Plan) -> str:
    """Dispute again, unless an open dispute of these facts is there: then it reached a person
    before the crash (disputing again would open a second one)."""
    if any(set(i.fact_ids) == set(plan["facts"]) for i in _open_disputes(mem)):
        return "disputed before the crash: its review item is open"
    run_operation(mem, "dispute", plan)
    return ""


def resume_dismiss(mem: Memory, plan: Plan) -> str:
    """Dismiss again the plan's messages still failed (an id no longer failed is refused)."""
    failed = {m.id for m in mem.messages(scope=MAIN) if m.status is MessageStatus.FAILED}
    left = [i for i in plan["dismiss"] if i in failed]
    if left:
        mem.dismiss_failed(left, scope=MAIN, by=REVIEWER, reason="unreadable")
    done = len(plan["dismiss"]) - len(left)
    return f"dismissed again: {done} of its messages dismissed before the crash" if done else ""


RETENTION = timedelta(days=1)


def plan_retention(rng: random.Random, workload: Workload) -> Plan:
    """Messages kept :data:`RETENTION`, applied at a time when 2 or more of one scope's stored
    messages (or of both: ``scope`` null), and not all, are older."""
    dataset = rng.choice([*(s.dataset for s in SCOPES), None])
    scopes = SCOPES if dataset is None else (_scope(dataset),)
    times = sorted({m.timestamp for s in scopes for m in workload.stored(s)})
    cutoff = times[rng.randint(2, len(times) - 2)]
    return {"scope": dataset, "at": (cutoff + RETENTION).isoformat()}


def run_retention(mem: Memory, plan: Plan) -> None:
    mem.keep_messages = RETENTION
    scope = _scope(plan["scope"]) if plan["scope"] else None
    mem.apply_retention(scope=scope, at=datetime.fromisoformat(plan["at"]))


def prepare(path: Path, op: str, plan: Plan) -> None:
    """Bring a closed copy of the base to where the operation starts (for :data:`PREPARED`).

    ``extract_pending``: its messages stored without extraction; ``retry_failed`` and
    ``dismiss_failed``: its messages added with :class:`FailingExtractor`, so each is marked
    ``failed``; ``confirm`` and ``resolve``: their disputes opened.
    """
    messages = [Message.model_validate(m) for m in plan.get("messages", ())]
    extractor = FailingExtractor() if op in ("retry_failed", "dismiss_failed") else None
    opened = Memory(path, dense=HashingEncoder(64), batch_size=BATCH_SIZE, extractor=extractor)
    with recorded_warnings(), opened as mem:
        if op in ("extract_pending", "retry_failed", "dismiss_failed"):
            mem.add(messages, scope=MAIN, extract=op != "extract_pending")
        groups = plan.get("disputed", []) + [facts for facts, _ in plan.get("items", [])]
        for facts in groups:
            mem.dispute(facts, scope=MAIN, reason="not what I said", by=REVIEWER)
        if op in ("expire", "extend_expiry"):
            give_expiries(mem, plan, EXPIRED_BY if op == "expire" else EXPIRES_LATER)


EXPIRED_BY = datetime(2024, 6, 1, tzinfo=UTC)
"""When the facts an ``expire`` trial sweeps expired (before the sweep's time)."""
EXPIRES_LATER = datetime(2090, 1, 1, tzinfo=UTC)
"""When the facts an ``extend_expiry`` trial moves expire before it (still current)."""
EXTENDED_TO = datetime(2095, 1, 1, tzinfo=UTC)
"""Where an ``extend_expiry`` trial moves them."""


def plan_expire(rng: random.Random, active: Sequence[str]) -> Plan:
    """2-8 active facts past their expiry (given by :func:`prepare`), swept at a later time."""
    chosen = rng.sample(sorted(active), rng.randint(2, min(8, len(active))))
    return {"facts": chosen, "at": (EXPIRED_BY + timedelta(days=rng.randint(1, 9))).isoformat()}


def give_expiries(mem: Memory, plan: Plan, ends: datetime) -> None:
    """Give the plan's facts an expiry (``ends``, a minute apart; as the record store writes)."""
    facts = mem.facts(scope=MAIN, ids=plan["facts"])
    ended = [
        f.model_copy(update={"expires_at": ends - timedelta(minutes=n)})
        for n, f in enumerate(facts)
    ]
    mem.store.update_facts(MAIN, ended, action=AuditAction.EXPIRY_SET)


# -- updates, datasets and the profile --------------------------------------------------------
_CITIES = ("Oslo", "Nairobi", "Quito", "Hanoi", "Tallinn", "Cusco")
_MONTHS = ("January", "February", "March", "April", "May", "June")
BASE_PROFILE = (
    ("lifestyle", "hobbies", "Sara plays chess on Sundays."),
    ("relationships", "pets", "Sara has a beagle named Rex."),
    ("preferences", "interests", "Tom likes podcasts about volcanoes."),
)
"""Profile entries :func:`build_base` puts in the main scope (a ``profile_forget`` removes some)."""
_PROFILE_PUTS = (
    ("lifestyle", "hobbies", "Sara plays the cello and chess."),
    ("work", "occupation", "Sara teaches chemistry."),
    ("relationships", "family", "Sara has a sister, Ana, and a daughter, Lily."),
    ("basic_info", "residence", "Sara lives in Lisbon."),
    ("lifestyle", "diet", "Sara is allergic to peanuts."),
)


def plan_update(rng: random.Random, active: Sequence[str]) -> Plan:
    """One active fact updated to a new statement with a time (its valid end is the same in
    every run, whenever it runs)."""
    month = rng.randrange(len(_MONTHS))
    when = f"[in {_MONTHS[month]} 2024::2024-{month + 1:02d}]"
    text = f"{rng.choice(_SPEAKERS)} moved to {rng.choice(_CITIES)} {when}."
    return {"fact": rng.choice(sorted(active)), "text": text, "reason": "corrected by support"}


def run_update(mem: Memory, plan: Plan) -> None:
    mem.update(plan["fact"], plan["text"], scope=MAIN, reason=plan["reason"], by="reviewer:ana")


def resume_update(mem: Memory, plan: Plan) -> str:
    """Update again; ``ConflictError`` with the fact superseded answers "done before the crash".

    Then the pending messages are extracted, as a later ``add`` would: none may be the update's.
    """
    note = ""
    try:
        run_update(mem, plan)
    except ConflictError:
        if mem.get(plan["fact"], scope=MAIN).status is not FactStatus.SUPERSEDED:
            raise
        note = "updated again: ConflictError, the fact was superseded before the crash"
    mem.extract_pending(scope=MAIN)
    return note


def plan_delete_dataset(rng: random.Random) -> Plan:
    """One of the two datasets, deleted whole (the other must stay as it was)."""
    return {"dataset": rng.choice([s.dataset for s in SCOPES])}


def plan_profile_put(rng: random.Random, active: Sequence[str]) -> Plan:
    """1-3 profile entries set in the main scope, each citing 0-2 active facts."""
    chosen = rng.sample(_PROFILE_PUTS, rng.randint(1, 3))
    return {
        "entries": [
            [topic, subtopic, text, rng.sample(sorted(active), rng.randint(0, 2))]
            for topic, subtopic, text in chosen
        ]
    }


def run_profile_put(mem: Memory, plan: Plan) -> None:
    for topic, subtopic, text, facts in plan["entries"]:
        mem.profile_put(topic, subtopic, text, scope=MAIN, facts=facts, reason="the user said so")


def plan_profile_forget(rng: random.Random) -> Plan:
    """1-2 of the entries of :data:`BASE_PROFILE` removed."""
    chosen = rng.sample(BASE_PROFILE, rng.randint(1, 2))
    return {"entries": [[topic, subtopic] for topic, subtopic, _ in chosen]}


def run_profile_forget(mem: Memory, plan: Plan) -> None:
    for topic, subtopic in plan["entries"]:
        mem.profile_forget(topic, subtopic, scope=MAIN, reason="the user asked")


def resume_profile_forget(mem: Memory, plan: Plan) -> str:
    """Remove again; an entry removed already answers ``NotFoundError`` (read as done)."""
    removed = 0
    for topic, subtopic in plan["entries"]:
        try:
            mem.profile_forget(topic, subtopic, scope=MAIN, reason="the user asked")
        except NotFoundError:
            removed += 1
    return f"forgotten again: NotFoundError, {removed} removed before the crash" if removed else ""


def deleted_dataset(op: str, plan: Plan) -> str | None:
    """The dataset a ``delete`` or ``delete_dataset`` trial deletes (``None`` for the others)."""
    return plan["scope"] if op == "delete_scope" else plan.get("dataset")


# -- kill points ------------------------------------------------------------------------------
class KillSwitch:
    """Numbers the kill points an operation passes; SIGKILLs this process at ``kill_at``.

    Point ``k`` is just before the ``k``-th hooked call (counting from 0); point ``len(labels)``
    is after the operation returned. Without ``kill_at`` it only records the labels. With
    ``within`` (seconds), the process is killed that long after point ``kill_at`` instead, most
    likely inside the call that starts there (a tantivy commit: :data:`INSIDE_TANTIVY`).
    """

    def __init__(self, kill_at: int | None = None, within: float | None = None) -> None:
        self.kill_at = kill_at
        self.within = within
        self.labels: list[str] = []

    def reached(self, label: str) -> None:
        if self.kill_at is not None and len(self.labels) == self.kill_at:
            if self.within is None:
                self._die(label)
            else:
                self._arm(label, self.within)
        self.labels.append(label)

    def finish(self) -> None:
        """The operation returned: die here if the chosen point is past every hooked call."""
        if self.kill_at is not None and self.within is None:
            self._die(None)

    def _arm(self, before: str, within: float) -> None:
        """Have the kernel end this process ``within`` s from now, wherever it is then.

        By SIGALRM, whose default action ends the process as SIGKILL does (no handler, no
        cleanup) and which needs no Python code to run: a tantivy commit holds the interpreter.
        """
        after = self.labels[-1] if self.labels else None
        point = {"after": after, "before": before, "within": within}
        print(KILL_LINE, json.dumps(point), flush=True)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.setitimer(signal.ITIMER_REAL, max(within, 1e-6))  # 0 would disarm it

    def _die(self, before: str | None) -> None:
        after = self.labels[-1] if self.labels else None
        print(KILL_LINE, json.dumps({"after": after, "before": before}), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


def _collection_label(what: str) -> Callable[[tuple[Any, ...]], str]:
    return lambda args: f"Qdrant {what} {args[1].value}"


_HOOKS: tuple[tuple[object, str, Callable[[tuple[Any, ...]], str]], ...] = (
    (EdgeBackend, "_upsert", _collection_label("upsert")),
    (EdgeBackend, "_set_payload", _collection_label("set_payload")),
    (EdgeBackend, "_delete", _collection_label("delete")),
    (EdgeBackend, "_compact", lambda args: f"compaction of {args[1].value}"),
    (edge, "_copy_points", lambda args: "compaction copy"),
    (edge, "_recover", lambda args: f"compaction swap {args[0].name}"),
    (LexicalIndex, "_commit", lambda args: "tantivy commit"),
    (LexicalIndex, "erase", lambda args: "tantivy erase"),
    (EdgeBackend, "optimize", lambda args: OPTIMIZE_LABEL),
)


def _hooked(
    original: Callable[..., Any], label: Callable[[tuple[Any, ...]], str], switch: KillSwitch
) -> Callable[..., Any]:
    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        switch.reached(label(args))
        return original(*args, **kwargs)

    return call


@contextmanager
def kill_points(switch: KillSwitch) -> Iterator[KillSwitch]:
    """Route every Qdrant write, compaction step and tantivy commit through ``switch``."""
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in _HOOKS]
    for (owner, name, original), (_, _, label) in zip(saved, _HOOKS, strict=True):
        setattr(owner, name, _hooked(original, label, switch))
    try:
        yield switch
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


TIMED_MID, TIMED_AFTER = "timed SIGKILL, mid-operation", "timed SIGKILL, after the operation"
INSIDE_TANTIVY = "0-10 ms into a tantivy commit / erase"
"""Killed a random 0-10 ms after a tantivy commit or erase began (:class:`KillSwitch`'s
``within``): inside it most of the time, where a kill leaves files half written."""
INSIDE_OPTIMIZE = "0-10 ms into a Qdrant optimize"
"""The same inside :meth:`EdgeBackend.optimize` (segments merged, then flushed)."""
OPTIMIZE_LABEL = "Qdrant optimize"
WITHIN_S = 0.01
CATEGORIES = (
    "before the first write",
    "between two Qdrant writes",
    "after a Qdrant write, before the tantivy write",
    "after a tantivy write, before a Qdrant write",
    "during a compaction / erase",
    "after the last write",
    INSIDE_TANTIVY,
    INSIDE_OPTIMIZE,
    TIMED_MID,
    TIMED_AFTER,
)
"""Kinds of kill moment: those of :func:`kill_category`, :data:`INSIDE_TANTIVY` and
:data:`INSIDE_OPTIMIZE`, then those of a timed SIGKILL."""


def kill_category(after: str | None, before: str | None) -> str:
    """Which kind of moment a kill point is, from the hooked calls around it."""
    if after is None:
        return "before the first write"
    if before is None:
        return "after the last write"
    if any(w in f"{after} {before}" for w in ("compaction", "erase")):
        return "during a compaction / erase"
    if after.startswith("Qdrant") and before.startswith("Qdrant"):
        return "between two Qdrant writes"
    if after.startswith("Qdrant"):
        return "after a Qdrant write, before the tantivy write"
    return "after a tantivy write, before a Qdrant write"


def point_label(labels: Sequence[str], point: int) -> tuple[str | None, str | None]:
    """The hooked calls just before and just after kill point ``point`` (``None``: none)."""
    return labels[point - 1] if point else None, labels[point] if point < len(labels) else None


def describe_point(after: str | None, before: str | None, within: float | None = None) -> str:
    if within is not None:
        return f"{within * 1000:.0f} ms into {before}, after {after or 'opening'}"
    return f"after {after or 'opening'}, before {before or 'the end'}"


def points_by_category(labels: Sequence[str]) -> dict[str, list[int]]:
    """Every kill point of an operation, grouped by :func:`kill_category`; those just before a
    tantivy call or an optimize also under :func:`inside_category`."""
    found: dict[str, list[int]] = {}
    for point in range(len(labels) + 1):
        after, before = point_label(labels, point)
        found.setdefault(kill_category(after, before), []).append(point)
        inside = inside_category(before)
        if inside is not None:
            found.setdefault(inside, []).append(point)
    return found


def inside_category(before: str | None) -> str | None:
    """The kind of a kill a few ms into the call ``before`` (``None``: it is not killed so)."""
    if before is not None and before.startswith("tantivy"):
        return INSIDE_TANTIVY
    return INSIDE_OPTIMIZE if before == OPTIMIZE_LABEL else None


def run_child(spec: dict[str, Any]) -> None:
    """The killed process: open the store, run the operation, die at the chosen point."""
    mem = open_memory(Path(spec["store"]))
    print("ready", flush=True)
    with kill_points(KillSwitch(spec["kill_at"], spec.get("within"))) as switch:
        run_operation(mem, spec["op"], spec["plan"])
        switch.finish()
    print("done", flush=True)
    while True:  # a timed kill is on its way: the store is never closed
        signal.pause()


# -- state and checks -------------------------------------------------------------------------
def receipt_problems(mem: Memory, plan: Plan, *, finished: bool) -> list[str]:
    """What is wrong with the erasure receipts of a purge's dataset after a kill.

    Every receipt listed must verify and name no fact the store still holds (no receipt of an
    unfinished erasure); at most one may name the purged facts, and once the purge is
    ``finished`` (resumed), one must.
    """
    problems = []
    held = {f.id for f in mem.facts(scope=MAIN, include_inactive=True)}
    wanted = set(plan["facts"])
    found = mem.receipts(MAIN.dataset)
    for receipt in found:
        if set(receipt.facts) & held:
            problems.append(f"receipt {receipt.id} names facts the store still holds")
        check = mem.verify_erasure(receipt)
        if not check.ok:
            problems.append(f"receipt {receipt.id} does not verify: {check.findings[:3]}")
    covering = [r for r in found if wanted & set(r.facts)]
    if len(covering) > 1:
        problems.append(f"{len(covering)} receipts name the purged facts")
    if finished and not covering:
        problems.append("the purge finished without a receipt")
    return problems


@dataclass(frozen=True, slots=True)
class StoreState:
    """What the record store holds in both scopes, as comparable rows."""

    messages: dict[str, tuple[str, str, str]]
    """Stored id -> (scope, source id, status)."""
    facts: dict[str, tuple[Any, ...]]
    """Fact id -> (scope, status, text, sources, supersedes, superseded_by, valid_to, trust,
    expires_at)."""
    entities: dict[str, tuple[Any, ...]]
    """Entity id -> (scope, name, aliases, description versions)."""
    audited: frozenset[tuple[str, str]]
    """(action, target id) of every audit event about a message or fact change."""
    audit_ids: dict[str, frozenset[str]] = field(default_factory=dict)
    """Scope key -> the ids of every audit event of the scope."""
    texts: dict[str, str] = field(default_factory=dict)
    """Message or fact id -> its text."""
    corpus: str = ""
    """Every text of every record, lowercase: messages, facts, entity names and descriptions."""
    imported: tuple[Any, ...] = ()
    """What an import leaves in :data:`COPY` besides its records (:func:`import_rows`)."""
    profiles: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    """Profile entry version id -> (scope, topic, subtopic, version, text, fact ids, removed)."""
    reviews: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    """Scope key -> its open review items, each (kind, fact ids), sorted (ids differ by run)."""

    def active(self, scope: Scope) -> set[str]:
        return {i for i, f in self.facts.items() if f[0] == scope.key and f[1] == "active"}

    def probe(self, scope: Scope, fact_id: str) -> Probe:
        return probe_for(scope, fact_id, self.facts[fact_id][2])


_AUDITED = (
    "stored",
    "processed",
    "created",
    "forgotten",
    "superseded",
    "purged",
    "profile_set",
    "profile_removed",
    "retracted",
    "confirmed",
    "disputed",
    "dismissed",
    "review_requested",
    "review_resolved",
    "expired",
    "expiry_set",
)
"""Actions of the changes :attr:`StoreState.audited` lists (an import's carried events aside:
they record changes of the exported store, not of this one). A resolved review is listed by
its facts (the item's id differs from run to run)."""


def snapshot(mem: Memory) -> StoreState:
    """What the store holds; an update's message and fact under ids of their order (below).

    ``Memory.update`` names its message by the time it runs (``update:<fact id>:<time>``), so an
    update run again after a crash stores another message and fact than the reference did:
    they are compared as ``update#<n>:<fact>`` (the ``n``-th update message of the fact, by
    time) and ``update#<n>-fact<k>:<fact>``.
    """
    messages: dict[str, tuple[str, str, str]] = {}
    facts: dict[str, tuple[Any, ...]] = {}
    entities: dict[str, tuple[Any, ...]] = {}
    profiles: dict[str, tuple[Any, ...]] = {}
    reviews: dict[str, tuple[Any, ...]] = {}
    audited: set[tuple[str, str]] = set()
    audit_ids: dict[str, frozenset[str]] = {}
    texts: dict[str, str] = {}
    words: list[str] = []
    rename: dict[str, str] = {}
    for scope in CHECKED:
        stored = mem.messages(scope=scope)
        found = mem.facts(scope=scope, include_inactive=True)
        rename |= _update_names(stored, found)
        for m in stored:
            source = m.message.source_id or ""
            messages[rename.get(m.id, m.id)] = (
                scope.key,
                rename.get(source, source),
                m.status.value,
            )
            texts[rename.get(m.id, m.id)] = m.message.text
            words += [m.message.speaker, m.message.text]
        for f in found:
            valid_to = f.valid_to.isoformat() if f.valid_to else ""
            sources, supersedes, superseded_by = (
                tuple(rename.get(i, i) for i in ids)
                for ids in (f.sources, f.supersedes, f.superseded_by)
            )
            row = (scope.key, f.status.value, f.text, sources, supersedes, superseded_by)
            expires = f.expires_at.isoformat() if f.expires_at else ""
            facts[rename.get(f.id, f.id)] = (*row, valid_to, f.trust.value, expires)
            texts[rename.get(f.id, f.id)] = f.text
            words.append(f.text)
        for e in mem.entities(scope=scope):
            entities[e.id] = (scope.key, e.name, e.aliases, len(e.versions))
            words += [e.name, *e.aliases, *(v.description for v in e.versions)]
        for p in mem.store.profile_versions(scope):
            cited = tuple(rename.get(i, i) for i in p.fact_ids)
            profiles[p.id] = (scope.key, p.topic, p.subtopic, p.version, p.text, cited, p.removed)
        items = mem.review_queue(scope=scope)
        named = [(i.kind.value, tuple(sorted(rename.get(f, f) for f in i.fact_ids))) for i in items]
        reviews[scope.key] = tuple(sorted(named))
        events = mem.audit(scope=scope)
        audit_ids[scope.key] = frozenset(e.id for e in events)
        for event in events:
            if event.action.value in _AUDITED and not event.details.get("imported"):
                resolved = event.action is AuditAction.REVIEW_RESOLVED
                targets = event.targets[1:] if resolved else event.targets  # the item first
                audited.update((event.action.value, rename.get(t, t)) for t in targets)
    corpus = "\n".join(words).lower()
    imported = import_rows(mem)
    return StoreState(
        messages,
        facts,
        entities,
        frozenset(audited),
        audit_ids,
        texts,
        corpus,
        imported,
        profiles,
        reviews,
    )


def import_rows(mem: Memory) -> tuple[Any, ...]:
    """:data:`COPY`'s profile versions, its own audit events (action, target: an import's
    creation events, each once) and its carried events (id, action, targets)."""
    profiles = tuple(
        (p.id, p.topic, p.subtopic, p.version, p.text, p.fact_ids, p.removed)
        for p in mem.store.profile_versions(COPY)
    )
    events = mem.audit(scope=COPY)
    own = sorted(
        (e.action.value, t) for e in events if not e.details.get("imported") for t in e.targets
    )
    carried = sorted((e.id, e.action.value, e.targets) for e in events if e.details.get("imported"))
    return (profiles, tuple(own), tuple(carried))


_UPDATE_SOURCE = re.compile(r"^update:([0-9a-f-]{36}):")


def live_names(mem: Memory) -> dict[str, str]:
    """Store id -> the name :func:`snapshot` gives it, for the ids it renames (of updates)."""
    names: dict[str, str] = {}
    for scope in SCOPES:
        found = mem.facts(scope=scope, include_inactive=True)
        names |= _update_names(mem.messages(scope=scope), found)
    return names


def _update_names(messages: Sequence[StoredMessage], facts: Sequence[Fact]) -> dict[str, str]:
    """The order names of the update messages (id and source id) and of the facts citing them."""
    updates: dict[str, list[StoredMessage]] = {}
    for m in messages:
        found = _UPDATE_SOURCE.match(m.message.source_id or "")
        if found:
            updates.setdefault(found.group(1), []).append(m)
    names: dict[str, str] = {}
    for fact_id, said in updates.items():
        for n, m in enumerate(sorted(said, key=lambda m: (m.message.timestamp, m.id))):
            name = f"update#{n}:{fact_id[:8]}"
            names[m.id] = names[m.message.source_id or ""] = name
            citing = sorted((f for f in facts if m.id in f.sources), key=lambda f: f.text)
            names.update((f.id, f"update#{n}-fact{k}:{fact_id[:8]}") for k, f in enumerate(citing))
    return names


@dataclass(slots=True)
class Verdict:
    """How a recovered store compares with the reference."""

    lost_messages: int = 0
    duplicates: int = 0
    resurrected: set[str] = field(default_factory=set)
    unaudited: list[str] = field(default_factory=list)
    """Actions of the reference's audit events missing after recovery (one per target)."""
    unaudited_changes: list[str] = field(default_factory=list)
    """Changes of the reference without an audit event after recovery (:func:`audited_changes`)."""
    text_left: list[str] | None = None
    """Probe words some file still holds after recovery (``None``: not scanned)."""
    opened: bool = True
    """Whether the store opened again (a reopen that raises is ``False``)."""
    differences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return not (self.differences or self.resurrected or self.lost_messages or self.duplicates)

    @property
    def ok(self) -> bool:
        """Recovered exactly, nothing left on disk, every change audited."""
        return self.exact and not (self.text_left or self.unaudited_changes)


def _surplus(got: Counter[Any], want: Counter[Any]) -> int:
    return sum(max(0, n - want[key]) for key, n in got.items())


def compare(
    reference: StoreState,
    recovered: StoreState,
    verdict: Verdict,
    erased: frozenset[str] = frozenset(),
) -> None:
    """Count lost messages, duplicates and audit gaps; list every other difference.

    Records of ``erased`` (the ids the operation erases) still there are differences, not
    duplicates.
    """
    ref_messages = Counter((s, src) for s, src, _ in reference.messages.values())
    got_messages = Counter(
        (s, src) for i, (s, src, _) in recovered.messages.items() if i not in erased
    )
    ref_facts = Counter((f[0], f[2], f[3]) for f in reference.facts.values())
    got_facts = Counter((f[0], f[2], f[3]) for i, f in recovered.facts.items() if i not in erased)
    verdict.lost_messages += _surplus(ref_messages, got_messages)
    verdict.duplicates += _surplus(got_messages, ref_messages) + _surplus(got_facts, ref_facts)
    verdict.unaudited += sorted(action for action, _ in reference.audited - recovered.audited)
    if reference.imported != recovered.imported:
        verdict.differences.append(_import_difference(reference.imported, recovered.imported))
    for kind, want, got in (
        ("message", reference.messages, recovered.messages),
        ("fact", reference.facts, recovered.facts),
        ("entity", reference.entities, recovered.entities),
        ("profile entry", reference.profiles, recovered.profiles),
        ("open review items of", reference.reviews, recovered.reviews),
    ):
        for key in sorted(want.keys() | got.keys()):
            expected, found = want.get(key), got.get(key)
            if expected != found:
                verdict.differences.append(
                    f"{kind} {key[:8]}: expected {_brief(expected)}, got {_brief(found)}"
                )


def _import_difference(want: tuple[Any, ...], got: tuple[Any, ...]) -> str:
    """Which of :func:`import_rows`' parts differ, and by how many rows."""
    parts = ("profile versions", "own audit events", "carried audit events")
    differing = [
        f"{name}: expected {len(a)}, got {len(b)}{'' if len(a) != len(b) else ' (others)'}"
        for name, a, b in zip(parts, want or ((),) * 3, got or ((),) * 3, strict=True)
        if a != b
    ]
    return f"the import's {'; '.join(differing)}"


def _brief(row: tuple[Any, ...] | None) -> str:
    return "nothing" if row is None else repr(row)[:160]


@dataclass(frozen=True, slots=True)
class Probe:
    """A question that finds one fact: its words without time annotations or brackets."""

    scope: Scope
    fact_id: str
    question: str
    text: str
    """The fact's readable text, looked for in the context block."""


_ANNOTATION = re.compile(r"\[[^\[\]]*::[^\[\]]*\]")


def probe_for(scope: Scope, fact_id: str, text: str) -> Probe:
    # A time in the question would make superseded facts of that time legitimate answers.
    words = _ANNOTATION.sub(" ", text).replace("[", "").replace("]", "")
    words = re.sub(r"\s+([.,;!?])", r"\1", re.sub(r"\s+", " ", words))
    return Probe(scope, fact_id, words.strip(), plain_text(text).rstrip(". "))


def served_inactive(
    mem: Memory, probes: Sequence[Probe], allowed: Callable[[Scope], set[str]], *, listing: bool
) -> set[str]:
    """Fact ids a read serves that ``allowed`` says are not active (searches, context, facts).

    Ids are compared as :func:`snapshot` names them.
    """
    names = live_names(mem)
    found: set[str] = set()
    for probe in probes:
        active = allowed(probe.scope)
        for mode in MODES:
            hits = mem.search(probe.question, scope=probe.scope, mode=mode)
            found |= {names.get(h.fact.id, h.fact.id) for h in hits} - active
        context = mem.context(probe.question, scope=probe.scope, mode="deep")
        served = {h.fact.id: names.get(h.fact.id, h.fact.id) for h in context.hits}
        found |= set(served.values()) - active
        same_text = any(served[h.fact.id] in active and probe.text in h.text for h in context.hits)
        if probe.fact_id not in active and probe.text in context.text and not same_text:
            found.add(probe.fact_id)
    if listing:
        for scope in CHECKED:
            found |= {names.get(f.id, f.id) for f in mem.facts(scope=scope)} - allowed(scope)
    return found


def lexical_problems(mem: Memory, probes: Sequence[Probe], reference: StoreState) -> list[str]:
    """How the boolean path's tantivy index disagrees with the store, after a deep search."""
    index: LexicalIndex = mem._lexical
    problems = []
    for scope in CHECKED:
        mem.search("what happened", scope=scope, mode="deep")
        stored, indexed = mem.store.count_facts(scope), index.count(scope)
        if stored != indexed:
            problems.append(f"lexical index of {scope.key}: {indexed} documents, {stored} facts")
    names = live_names(mem)
    for probe in probes:
        ids = {names.get(i, i) for i, _ in index.search(probe.scope, probe.question, limit=50)}
        stale = ids - reference.active(probe.scope)
        if stale:
            problems.append(f"lexical index serves inactive facts {sorted(stale)}")
    return problems


@dataclass(frozen=True, slots=True)
class Base:
    """A closed store every trial copies, what it holds, and how many probes find their fact."""

    path: Path
    state: StoreState
    probe_power: tuple[int, int] = (0, 0)
    on_disk: frozenset[str] = frozenset()
    """The words of its records (:func:`words_of`) :func:`text_left` finds in its files, less
    those a store without them holds too (field names, statuses, actions: :func:`blank_files`)."""
    terms: bytes = b""
    """Its tantivy term dictionaries (``.term`` files): what a term chain must be found in."""
    blank_terms: bytes = b""
    """Those of the store without its words: a term chain found there is not a word's."""


_BLANK = ("I own a cat.", "I like tea.", "I saw a fox.", "I hid a key.", "Oh, wow!")
"""Four facts, then a filler the extractor discards: the reason it stores ("greeting, thanks or
reaction without content") is the store's own text, not an erased message's."""


def blank_files(path: Path) -> Path:
    """A store at ``path`` that went through every kind of change, with no word of 5 letters
    in its messages.

    Whatever its files hold of the words of a workload is the store's own (field names, statuses,
    audit actions, the extractor's reasons), not content.
    """
    start = datetime(2024, 1, 1, tzinfo=UTC)
    said = [
        Message(speaker=_SPEAKERS[i % 2], text=t, timestamp=start + timedelta(minutes=i))
        for i, t in enumerate(_BLANK)
    ]
    with recorded_warnings(), open_memory(path) as mem:
        mem.add(said, scope=MAIN)
        mem.search("what happened", scope=MAIN, mode="deep")
        first, second, third, fourth = (f.id for f in mem.facts(scope=MAIN))
        mem.forget([first], scope=MAIN)
        mem.supersede(second, [third], scope=MAIN)
        mem.purge([fourth], scope=MAIN, messages=True)
        mem.search("what happened", scope=MAIN, mode="deep")
    return path


def build_base(path: Path, workload: Workload, *, disk: bool = True) -> Base:
    """Store and extract the base messages in both scopes; a deep search marks the lexical index.

    With ``disk``, also what the disk probes of an erasure need (:attr:`Base.on_disk`, ...).
    """
    with recorded_warnings(), open_memory(path) as mem:
        for scope in SCOPES:
            mem.add(workload.stored(scope), scope=scope)
            mem.search("what happened", scope=scope, mode="deep")  # the boolean path's index
        for topic, subtopic, text in BASE_PROFILE:
            mem.profile_put(topic, subtopic, text, scope=MAIN)
        state = snapshot(mem)
        # The probes are worth something only if they find their fact while it is active.
        sample = random.Random(0).sample(sorted(state.active(MAIN)), 2 * PROBES)
        probes = [state.probe(MAIN, i) for i in sample]
        served = served_inactive(mem, probes, lambda scope: set(), listing=False)
    power = (sum(p.fact_id in served for p in probes), len(probes))
    if not disk:
        return Base(path, state, power)
    # The disk probes are worth something only if they find the words while they are stored,
    # and not in a store without them.
    words = [DiskProbe(w) for w in sorted({w for t in state.texts.values() for w in words_of(t)})]
    blank = blank_files(path.with_name(path.name + "-blank"))
    on_disk = frozenset(text_left(path, words)) - set(text_left(blank, words))
    terms, blank_terms = (
        b"\0".join(_contents(f) for f in sorted(root.rglob("*.term")) if f.is_file())
        for root in (path, blank)
    )
    shutil.rmtree(blank)
    return Base(path, state, power, on_disk, terms, blank_terms)


def _sample(ids: Sequence[str], key: str) -> list[str]:
    return random.Random(key).sample(sorted(ids), min(PROBES, len(ids)))


_NOTHING_RETIRED = (
    "dismiss_failed",
    "confirm",
    "dispute",
    "apply_retention",
    "optimize",
    "extend_expiry",
)
"""Operations that neither retire a fact nor create one (retention erases messages only)."""


def select_probes(op: str, plan: Plan, base: StoreState, done: StoreState) -> list[Probe]:
    """The facts whose resurrection a trial looks for: those the operation retires or adds."""
    key = plan_key(op, plan)
    if op == "forget":
        ids, scope = list(plan["facts"]), MAIN
    elif op == "supersede":
        ids, scope = [old for old, _ in plan["pairs"]], MAIN
    elif op == "purge":
        ids, scope = list(plan["facts"]), MAIN
    elif op in ("delete_scope", "delete_dataset"):
        scope = _scope(str(deleted_dataset(op, plan)))
        ids = _sample([i for i, f in base.facts.items() if f[0] == scope.key], key)
    elif op == "import":
        ids, scope = _sample(list(done.facts.keys() - base.facts.keys()), key), COPY
    elif op == "update":
        ids, scope = [plan["fact"]], MAIN
    elif op == "resolve":
        ids, scope = [f for facts, accept in plan["items"] if not accept for f in facts], MAIN
    elif op == "expire":
        ids, scope = list(plan["facts"]), MAIN
    elif op.startswith("profile_") or op in _NOTHING_RETIRED:
        ids, scope = [], MAIN  # no fact leaves the reads: the records are compared
    else:
        ids, scope = _sample(list(done.facts.keys() - base.facts.keys()), key), MAIN
    return [(done if i in done.facts else base).probe(scope, i) for i in ids]


def found_by_boolean(mem: Memory, probe: Probe) -> bool:
    """Whether a deep search for the probe finds its fact through the boolean path (tantivy)."""
    hits = mem.search(probe.question, scope=probe.scope, mode="deep")
    return any(h.fact.id == probe.fact_id and BOOLEAN in h.paths for h in hits)


def damage(lexical: Path, kind: str, rng: random.Random) -> None:
    """Damage the lexical index folder of a closed store as ``kind`` (one of DAMAGES) says."""
    if kind == "damaged lexical meta.json":
        meta = lexical / "meta.json"
        text = meta.read_text(encoding="utf-8")
        meta.write_text(text[: rng.randrange(1, len(text) // 2)], encoding="utf-8")
    elif kind == "missing lexical .term":
        rng.choice(sorted(lexical.glob("*.term"))).unlink()
    elif kind == "zeroed lexical .store":
        store = rng.choice([p for p in sorted(lexical.glob("*.store")) if p.stat().st_size])
        store.write_bytes(b"\0" * store.stat().st_size)
    elif kind == "missing lexical folder":
        shutil.rmtree(lexical)
    else:
        raise ValueError(f"unknown damage {kind!r}")


# -- audit ------------------------------------------------------------------------------------
SCOPE_DELETED = "scope deleted"
_STATUS_EVENTS = ("forgotten", "superseded", "retracted", "expired")
_TRUST_EVENTS = ("confirmed", "disputed")
_MESSAGE_EVENTS = ("processed", "dismissed")


def audited_changes(op: str, plan: Plan, before: StoreState, after: StoreState) -> list[str]:
    """The changes from ``before`` to ``after``, each as the audit event it needs ("action id").

    Facts created, forgotten, superseded, retracted, confirmed, disputed or purged, messages
    stored, extracted, dismissed or purged, review items opened or resolved (by their facts),
    profile versions written (set or removed); a deleted scope or dataset is one change
    (``"scope deleted <dataset>"``): its audit goes with it, the other scope's stays.
    """
    dataset = deleted_dataset(op, plan)
    if dataset is not None:
        return [f"{SCOPE_DELETED} {dataset}"]
    if op == "import":
        return _import_changes(before, after)
    needed = [f"created {i}" for i in after.facts.keys() - before.facts.keys()]
    for i, row in after.facts.items():
        old = before.facts.get(i)
        if old is not None and row[1] != old[1] and row[1] in _STATUS_EVENTS:
            needed.append(f"{row[1]} {i}")
        if old is not None and row[7] != old[7] and row[7] in _TRUST_EVENTS:
            needed.append(f"{row[7]} {i}")
        if old is not None and row[8:] != old[8:]:
            needed.append(f"expiry_set {i}")
    needed += [f"purged {i}" for i in before.facts.keys() - after.facts.keys()]
    needed += [f"stored {i}" for i in after.messages.keys() - before.messages.keys()]
    needed += [f"purged {i}" for i in before.messages.keys() - after.messages.keys()]
    needed += [
        f"{row[2]} {i}"
        for i, row in after.messages.items()
        if i in before.messages and row[2] != before.messages[i][2] and row[2] in _MESSAGE_EVENTS
    ]
    for key in before.reviews.keys() | after.reviews.keys():
        was, now = Counter(before.reviews.get(key, ())), Counter(after.reviews.get(key, ()))
        needed += [f"review_requested {f}" for _, facts in now - was for f in facts]
        needed += [f"review_resolved {f}" for _, facts in was - now for f in facts]
    needed += [
        f"profile_{'removed' if after.profiles[i][6] else 'set'} {i}"
        for i in after.profiles.keys() - before.profiles.keys()
    ]
    return sorted(needed)


def _import_changes(before: StoreState, after: StoreState) -> list[str]:
    """An import's records, each with the creation event the import writes (its carried events,
    the exported store's history, are compared by :func:`import_rows`)."""
    needed = [f"stored {i}" for i in after.messages.keys() - before.messages.keys()]
    needed += [f"created {i}" for i in after.facts.keys() - before.facts.keys()]
    needed += [f"created {i}" for i in after.entities.keys() - before.entities.keys()]
    return sorted(needed)


def unaudited_changes(changes: Sequence[str], before: StoreState, after: StoreState) -> list[str]:
    """The changes ``after``'s audit does not record (a deleted scope: the other scope's audit
    is not the one ``before`` had)."""
    missing = []
    for change in changes:
        action, _, target = change.rpartition(" ")
        if action == SCOPE_DELETED:
            kept = next(s.key for s in SCOPES if s.dataset != target)
            if after.audit_ids.get(kept) != before.audit_ids.get(kept):
                missing.append(f"{change} (the audit of {kept} changed)")
        elif (action, target) not in after.audited:
            missing.append(change)
    return missing


# -- text left on disk ------------------------------------------------------------------------
_FST_INPUTS = (
    b"te/oasripcnw.hlm-du012g=:bf3y5&_4v9678k%?xCDASFIBEjPTzRNM+LOqHGWUV,YKJZXQ;)(~[]$!'*@"
)
_WORD = re.compile(r"[A-Za-z]{5,}")
_HEX = re.compile(r"[a-f]+")
TERM_WINDOW = 4
"""Letters of a term probed as a chain of tantivy's term dictionary (see :func:`fst_chain`)."""


def fst_chain(token: str) -> bytes:
    """How tantivy's term dictionary (an FST) writes a run of ``token``'s letters.

    The FST holds no term as a contiguous string: each node with a single transition is one
    byte, ``0b11`` plus the input's rank among common bytes (fst's ``COMMON_INPUTS``), and the
    nodes of a term's tail come in reverse order. The first letters branch from shared nodes and
    the last ones may share a suffix, so only runs inside a term can be found, and only those
    :func:`disk_probes` saw in the base store's files are kept. The encoding of
    :func:`membrain.testing.tantivy_term`, for any run rather than one fixed slice of a long
    token: short words have runs worth probing too.
    """
    return bytes(0xC0 | (_FST_INPUTS.index(c) + 1) for c in reversed(token.encode()))


@functools.cache
def _analyzers() -> tuple[tantivy.TextAnalyzer, ...]:
    """The lexical index's tokenizers: ``en_stem`` (fact text) and ``default`` (entities)."""
    built = []
    for stem in (True, False):
        builder = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        builder = builder.filter(tantivy.Filter.remove_long(40)).filter(tantivy.Filter.lowercase())
        if stem:
            builder = builder.filter(tantivy.Filter.stemmer("english"))
        built.append(builder.build())
    return tuple(built)


def words_of(text: str) -> set[str]:
    """The words a disk probe may look for: ASCII letters only, at least 5, lowercase, not hex."""
    return {w for w in map(str.lower, _WORD.findall(text)) if not _HEX.fullmatch(w)}


@dataclass(frozen=True, slots=True)
class DiskProbe:
    """A word an erasure must remove: as text in any file, and as tantivy term chains."""

    word: str
    terms: tuple[bytes, ...] = ()
    """:func:`fst_chain` of runs of its terms, looked for in tantivy's ``.term`` files."""


def disk_probes(before: StoreState, after: StoreState, base: Base) -> list[DiskProbe]:
    """The distinctive words of every message and fact ``after`` no longer holds.

    A word is kept when no remaining record's text contains it (nor its tantivy terms) and the
    base store's files hold it (:attr:`Base.on_disk`); its term chains when the base's term
    dictionaries hold them and a blank store's do not.
    """
    erased = (before.texts[i] for i in before.texts.keys() - after.texts.keys())
    words = sorted({w for text in erased for w in words_of(text)} & base.on_disk)
    kept_terms = " ".join(t for a in _analyzers() for t in a.analyze(after.corpus))
    probes = []
    for word in words:
        if word in after.corpus or word in kept_terms:
            continue
        terms = {t for a in _analyzers() for t in a.analyze(word)}
        runs = {t[i : i + TERM_WINDOW] for t in terms for i in range(len(t) - TERM_WINDOW + 1)}
        chains = [
            chain
            for run in sorted(runs)
            if run not in after.corpus
            and run not in kept_terms
            and (chain := fst_chain(run)) in base.terms
            and chain not in base.blank_terms
        ]
        probes.append(DiskProbe(word, tuple(chains)))
    return probes


def _contents(path: Path) -> bytes:
    """A file's data without its holes and runs of zeros at the ends of its extents."""
    return b"\0".join(map(_trimmed, (chunk for _, chunk in file_extents(path))))


def _trimmed(chunk: bytes) -> bytes:
    """``chunk.strip(b"\\0")``, faster (Qdrant preallocates files of zeros)."""
    data = np.frombuffer(chunk, dtype=np.uint8) != 0
    if not data.any():
        return b""
    return chunk[int(data.argmax()) : len(chunk) - int(data[::-1].argmax())]


def text_left(root: Path, probes: Sequence[DiskProbe]) -> list[str]:
    """The probe words some file under ``root`` holds: as text (ASCII case ignored) in any
    file, or as one of their term chains in a tantivy term dictionary (a ``.term`` file)."""
    found: set[str] = set()
    for path in sorted(f for f in root.rglob("*") if f.is_file()):
        left = [p for p in probes if p.word not in found]
        if not left:
            break
        data = _contents(path)
        text, terms = data.lower(), path.suffix == ".term"
        for probe in left:
            if probe.word.encode() in text or (terms and any(c in data for c in probe.terms)):
                found.add(probe.word)
    return sorted(found)
