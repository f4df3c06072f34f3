"""Off-topic questions against ``Memory.context``'s default relevance floor.

Usage (from the repository root)::

    python -m benchmarks.off_topic_context [--locomo ../shared/data/locomo/locomo10_dev.json] \
        [--limit-conversations N] [--chats benchmarks/data/agent_chats.json ...] \
        [--modes fast expand] [--floor F]

The LoCoMo conversations (offline extractor) and the agent chats (``benchmarks/agent_memory.py``'s
data, offline, session by session) are added to one fresh store, each in its own scope. Every
question of ``benchmarks/data/off_topic_questions.json`` is asked of every scope with
``Memory.context(question, scope=..., mode=...)`` at the default floor
(:data:`membrain.api.requests.CONTEXT_MIN_RELEVANCE`, or ``--floor``), and counted when the
context holds no fact (``nothing_relevant``). The even-numbered questions calibrated
``MemoryHit.relevance`` (``benchmarks/calibrate_relevance.py``); the odd-numbered ones are held
out, and counted apart. The agent chats' own questions are asked too: those whose context holds
no fact, and, of those with answer keywords, those whose context text holds them, with the floor
and without it.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.agent_memory import contains, ingest, load_chats
from benchmarks.locomo_eval import format_table
from benchmarks.locomo_retrieval import conversation_scope
from membrain import Memory, Scope
from membrain.api.requests import CONTEXT_MIN_RELEVANCE
from membrain.files.loaders import locomo_conversations
from membrain.temporal import plain_text

DATA = Path(__file__).parent / "data"
OFF_TOPIC = DATA / "off_topic_questions.json"


def _empty(mem: Memory, question: str, scope: Scope, mode: str, floor: float) -> bool:
    return mem.context(question, scope=scope, mode=mode, min_relevance=floor).nothing_relevant


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every figure, by set and mode."""
    questions = json.loads(OFF_TOPIC.read_text(encoding="utf-8"))["questions"]
    halves = {"calibration": questions[0::2], "held out": questions[1::2]}
    report: dict[str, Any] = {"floor": args.floor, "off_topic": {}, "chat_questions": {}}
    with tempfile.TemporaryDirectory(prefix="off-topic-") as folder, Memory(path=folder) as mem:
        sets: dict[str, list[Scope]] = {}
        if args.locomo is not None:
            raw = json.loads(args.locomo.read_text(encoding="utf-8"))
            conversations = locomo_conversations(raw)[: args.limit_conversations]
            for c in conversations:
                mem.add(c.messages, scope=conversation_scope(str(c.name)))
            sets["LoCoMo dev"] = [conversation_scope(str(c.name)) for c in conversations]
        chats = [chat for path in args.chats for chat in load_chats(path)]
        ingest(mem, chats)
        if chats:
            sets["agent chats"] = [chat.scope for chat in chats]
        for name, scopes in sets.items():
            for mode in args.modes:
                for half, asked in halves.items():
                    empty = sum(
                        _empty(mem, q, scope, mode, args.floor) for q in asked for scope in scopes
                    )
                    report["off_topic"][(name, mode, half)] = (empty, len(asked) * len(scopes))
        for mode in args.modes:
            tally = {"asked": 0, "empty": 0, "with keywords": 0, "found": 0, "found, no floor": 0}
            for chat in chats:
                for question in chat.questions:
                    tally["asked"] += 1
                    floored = mem.context(
                        question.text, scope=chat.scope, mode=mode, min_relevance=args.floor
                    )
                    tally["empty"] += floored.nothing_relevant
                    if question.answer:
                        every = mem.context(
                            question.text, scope=chat.scope, mode=mode, min_relevance=None
                        )
                        tally["with keywords"] += 1
                        tally["found"] += contains(question.answer, plain_text(floored.text))
                        tally["found, no floor"] += contains(
                            question.answer, plain_text(every.text)
                        )
            report["chat_questions"][mode] = tally
    return report


def format_report(report: dict[str, Any]) -> str:
    rows = [
        [name, mode, half, f"{empty}/{n}", f"{100 * empty / n:.1f}"]
        for (name, mode, half), (empty, n) in report["off_topic"].items()
    ]
    lines = [
        f"off-topic questions whose context holds no fact (floor {report['floor']})",
        format_table(["set", "mode", "questions", "no fact", "%"], rows),
        "",
        "agent-chat questions: context with no fact; answer keywords in the context text",
    ]
    rows = [
        [
            mode,
            f"{t['empty']}/{t['asked']}",
            f"{t['found']}/{t['with keywords']}",
            f"{t['found, no floor']}/{t['with keywords']}",
        ]
        for mode, t in report["chat_questions"].items()
    ]
    lines.append(format_table(["mode", "no fact", "keywords, floor", "keywords, none"], rows))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--locomo", type=Path, default=None, help="LoCoMo JSON file")
    parser.add_argument("--limit-conversations", type=int, default=None, metavar="N")
    parser.add_argument("--chats", nargs="*", type=Path, default=[DATA / "agent_chats.json"])
    parser.add_argument("--modes", nargs="+", default=["fast", "expand"])
    parser.add_argument("--floor", type=float, default=CONTEXT_MIN_RELEVANCE)
    args = parser.parse_args(argv)
    print(format_report(run(args)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
