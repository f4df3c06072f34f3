"""Knock-on review on the agent-chat sets: are the facts queued after a supersession stale?

Usage (from the repository root)::

    python -m benchmarks.knock_on [--sets agent_chats agent_chats_heldout ...] [--limit N] \
        [--settings offline scripted] [--hashing] [--json OUT]

Each conversation of each set (``benchmarks/data/<set>.json``, default every
``agent_chats*.json``) is ingested session by session into its own scope of a fresh store, in the
two settings of :mod:`benchmarks.agent_memory` (``offline``: the offline extractor;
``scripted``: the LLM extractor answered with the data's pre-written facts). Knock-on review
runs as shipped (the rule: no model is configured, the scripted one only extracts). After the
conversation, every supersession the audit log records and every ``knock_on`` review item are
scored.

Ground truth, from the data's own labels. The *stale keywords* of a supersession are

* the ``replaces`` keywords of the pre-written facts of the turns the new facts were extracted
  from (what the data says the turn makes no longer true), and
* the ``stale`` keywords of the conversation's ``current`` and ``plan`` questions that the
  replaced fact contains,

less any keyword the new facts contain themselves that no question calls stale ("the Japan trip
is pushed to October" replaces "Japan" and "May": only "May" is stale; "left Kuda" keeps "Kuda",
a question's stale answer). A queued fact is **caught** when it contains a
stale keyword of its change (whole words, case ignored, :func:`benchmarks.agent_memory.contains`)
and names an entity of the replaced fact other than one a stale keyword names (the same person:
"[Jonas] and [Nina] live in Munich" after Jonas and Nina split up, not "[Nina] loves plants");
otherwise it is **queued wrongly**. A fact **missed** is an active fact, stated before the
change, that would be caught so but that no item of the change queues. A change
with no stale keyword (a supersession the data does not ask for) is counted as *unlabelled*;
what it queues is queued wrongly.

The exit status is 0 whatever the figures (a measurement, not a gate).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.agent_memory import Chat, ScriptedAnswers, contains, load_chats
from benchmarks.locomo_eval import format_table
from membrain import Memory
from membrain.api.audit import ReviewKind
from membrain.api.models import Fact, FactStatus
from membrain.extraction.llm import as_llm_client
from membrain.extraction.llm_extractor import LLMExtractor
from membrain.temporal import plain_text
from membrain.testing import HashingEncoder

DATA = Path(__file__).resolve().parent / "data"
SETTINGS = ("offline", "scripted")
QUESTION_KINDS = ("current", "plan")


def all_sets() -> list[str]:
    return sorted(p.stem for p in DATA.glob("agent_chats*.json"))


def stale_keywords(chat: Chat, old: Fact, news: Sequence[Fact], turns: dict[str, Any]) -> set[str]:
    """The stale keywords of one supersession (see the module docstring)."""
    old_text = plain_text(old.text)
    new_text = " ".join(plain_text(n.text) for n in news)
    found: set[str] = set()
    for source in {s for n in news for s in n.sources}:
        turn = turns.get(source)
        for fact in turn.facts if turn is not None else ():
            found.update(fact.replaces)
    labelled: set[str] = set()
    for question in chat.questions:
        if question.kind in QUESTION_KINDS:
            labelled.update(question.stale)
            found.update(k for k in question.stale if contains([k], old_text))
    # A keyword the new facts repeat names the thing, not its old value ("the Japan trip is
    # pushed to October"), unless a question calls it stale ("left Kuda").
    return {k for k in found if k in labelled or not contains([k], new_text)}


def score_chat(mem: Memory, chat: Chat, tally: Counter[str], verbose: bool = False) -> None:
    """Add one ingested conversation's figures to ``tally`` (each verdict printed, verbose)."""

    def show(verdict: str, fact: Fact) -> None:
        if verbose:
            print(f"  {chat.id}: {verdict}: {plain_text(fact.text)}", file=sys.stderr)

    scope = chat.scope
    by_source = {t.id: t for t in chat.turns}
    turns = {m.id: by_source.get(m.message.source_id or "") for m in mem.messages(scope=scope)}
    facts = {f.id: f for f in mem.facts(scope=scope, include_inactive=True)}
    items = [i for i in mem.review_queue(scope=scope) if i.kind is ReviewKind.KNOCK_ON]
    queued_for: dict[str, set[str]] = {}
    for item in items:
        queued_for.setdefault(item.old or "", set()).update(item.fact_ids)
    for event in mem.audit(scope=scope, actions=["superseded"]):
        news = [facts[i] for i in event.details.get("superseded_by", []) if i in facts]
        for old_id in event.targets:
            old = facts.get(old_id)
            if old is None or not news:
                continue
            tally["supersessions"] += 1
            stale = stale_keywords(chat, old, news, turns)
            tally["labelled"] += bool(stale)
            queued = queued_for.get(old_id, set())
            tally["items"] += bool(queued)
            if verbose and (queued or stale):
                said = f"{plain_text(old.text)} -> {' '.join(plain_text(n.text) for n in news)}"
                print(f"{chat.id}: {said} (stale: {sorted(stale)})", file=sys.stderr)
            # The same person: an entity of the replaced fact other than the stale value.
            refs = zip(old.entities, old.entity_ids, strict=False)
            subject = {i for name, i in refs if not any(contains([k], name) for k in stale)}
            latest = max(n.stated_at for n in news)
            for fact_id in queued:
                fact = facts[fact_id]
                hit = any(contains([k], plain_text(fact.text)) for k in stale)
                verdict = "caught" if hit and subject & set(fact.entity_ids) else "wrong"
                tally[verdict] += 1
                show(verdict, fact)
            skip = {old_id, *(n.id for n in news), *queued}
            for fact in facts.values():
                if fact.id in skip or fact.status is not FactStatus.ACTIVE:
                    continue
                if fact.stated_at > latest or not subject & set(fact.entity_ids):
                    continue
                if any(contains([k], plain_text(fact.text)) for k in stale):
                    tally["missed"] += 1
                    show("missed", fact)


def run_set(
    name: str, setting: str, chats: Sequence[Chat], hashing: bool, verbose: bool = False
) -> dict[str, Any]:
    """Ingest one set in one setting into a fresh store, and score it."""
    answers = ScriptedAnswers(chats) if setting == "scripted" else None
    extractor = LLMExtractor(as_llm_client(answers.model())) if answers is not None else None
    dense = HashingEncoder(64) if hashing else None
    tally: Counter[str] = Counter()
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory() as folder,
        Memory(path=Path(folder) / "store", dense=dense, extractor=extractor) as mem,
    ):
        for chat in chats:
            for session in chat.sessions:
                mem.add([t.message() for t in session], scope=chat.scope)
            score_chat(mem, chat, tally, verbose)
    return {
        "set": name,
        "setting": setting,
        "conversations": len(chats),
        **{k: tally[k] for k in ("supersessions", "labelled", "items")},
        **{k: tally[k] for k in ("caught", "wrong", "missed")},
        "seconds": round(time.perf_counter() - started, 1),
    }


def format_report(rows: Sequence[dict[str, Any]]) -> str:
    header = ["set", "setting", "convs", "supersessions", "labelled", "items"]
    header += ["caught", "queued wrongly", "missed", "precision", "s"]
    lines = []
    for r in [*rows, *_totals(rows)]:
        queued = r["caught"] + r["wrong"]
        precision = f"{100 * r['caught'] / queued:.1f}" if queued else "-"
        lines.append(
            [
                r["set"],
                r["setting"],
                str(r["conversations"]),
                str(r["supersessions"]),
                str(r["labelled"]),
                str(r["items"]),
                str(r["caught"]),
                str(r["wrong"]),
                str(r["missed"]),
                precision,
                str(r["seconds"]),
            ]
        )
    return format_table(header, lines)


def _totals(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    totals = []
    for setting in dict.fromkeys(r["setting"] for r in rows):
        mine = [r for r in rows if r["setting"] == setting]
        if len(mine) < 2:
            continue
        keys = ("conversations", "supersessions", "labelled", "items", "caught", "wrong", "missed")
        total: dict[str, Any] = {"set": "all", "setting": setting}
        total |= {k: sum(r[k] for r in mine) for k in keys}
        total["seconds"] = round(sum(r["seconds"] for r in mine), 1)
        totals.append(total)
    return totals


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.knock_on", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--sets", nargs="+", default=all_sets(), help="data files, by stem")
    parser.add_argument("--settings", nargs="+", choices=SETTINGS, default=list(SETTINGS))
    parser.add_argument("--limit", type=int, default=None, help="conversations per set")
    parser.add_argument("--hashing", action="store_true", help="hashing encoder (smoke runs)")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    parser.add_argument("--verbose", action="store_true", help="print every verdict")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rows = []
    for name in args.sets:
        chats = load_chats(DATA / f"{name}.json")[: args.limit]
        for setting in args.settings:
            rows.append(run_set(name, setting, chats, args.hashing, args.verbose))
            print(f"{name} {setting}: {rows[-1]}", file=sys.stderr)
    print(format_report(rows))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
