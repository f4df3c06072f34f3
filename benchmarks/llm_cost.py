"""LLM cost of MemBrain's extraction on LoCoMo: calls and tokens per 100 turns, per batch size.

Usage (from the repository root)::

    python -m benchmarks.llm_cost --data ../shared/data/locomo/locomo10_dev.json \
        [--batch-size 16 32] [--context-window 6] [--limit-conversations N] [--json OUT]

What is measured. Every LoCoMo conversation is added, in its own scope, to a fresh temporary
store with ``Memory(llm=model, batch_size=B, context_window=W)``, once per batch size ``B``. The
figures are the ones :meth:`Memory.add` reports in its :class:`~membrain.memory.AddResult`: LLM
calls, input tokens and output tokens (cl100k, counted by MemBrain's client), and extraction
errors. An extraction batch costs two calls (entities, then facts); entity disambiguation may add
calls (counted and shown apart); a retry would add calls too, and is reported.

For comparison, the same run is made one message at a time (``batch_size=1``) on the first
conversation only, to keep the run short; the batch sizes' figures on that same conversation are
shown beside it, so the saving is read on identical turns.

The model is scripted. :class:`PromptDerivedModel` answers from the prompt itself: it parses the
window MemBrain rendered, lists the speakers of the target lines and the capitalised names in
their text as entities, and writes one fact per target line (``[Speaker] said: <text>``, entity
names bracketed, time expressions annotated with :func:`membrain.temporal.annotate`), stamped with
the line's time (a shared image is a line of its own, so there can be more facts than turns).
Its answers pass MemBrain's checks, so no retry happens; a same-entity question is answered
"different". Input tokens are therefore exactly those of the prompts MemBrain sends (system
prompt included); output tokens are those of the scripted answers, about the size of the facts.
A real model's answers will differ in size (it skips small talk, rewrites pronouns, writes
richer descriptions), and its retries, if any, add calls and input tokens. Embeddings are not
measured: the dense encoder is ``HashingEncoder(dim=64)``.

The profile. After each flush that stored facts about the user, one more call proposes the
profile's changes. In the runs above each conversation is one ``add`` (one flush); a chat
flushes more often, so a separate run adds each conversation in flushes of ``--flush-turns``
turns (at the default batch size) and reports the profile's calls and tokens per 100 turns
beside the extraction's in the same run. The scripted answer sets ``work/occupation`` or
``basic_info/residence`` from the first shown fact that says where someone works or lives, and
changes nothing otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.locomo_eval import format_table
from membrain import Memory
from membrain.api.models import Scope, TimeSpan
from membrain.api.tokens import count_tokens
from membrain.extraction.prompts import DIVIDER
from membrain.files.loaders import Conversation, load_conversations
from membrain.temporal import annotate, find_annotations, find_times, resolve
from membrain.testing import HashingEncoder, ScriptedChatModel

DEFAULT_DATA = Path("/work/shared/data/locomo/locomo10_dev.json")

_STAMP = "%Y-%m-%dT%H:%M:%SZ"
_SHOWN = re.compile(r"^(F\d+): (.+)$", re.MULTILINE)
_PROFILED = (
    (" works ", "work", "occupation"),
    (" work at ", "work", "occupation"),
    (" lives ", "basic_info", "residence"),
    (" live in ", "basic_info", "residence"),
)
_LINE = re.compile(
    r"^\[(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z)\] (.+?)"
    r"(?: \((shared an image|action|private thought)\))?: (.*)$"
)
_NAME_RUN = re.compile(r"(?<![\w'’])[A-Z][A-Za-z'’-]*[A-Za-z](?:[ -][A-Z][A-Za-z'’-]*[A-Za-z])*")
_SENTENCE_END = re.compile(r"[.!?…]\s*$")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?…])\s+")
_PAIR = re.compile(r"^\d+\. ", re.MULTILINE)
_STOP = frozenset(
    """
    i i'm i've i'll i'd hey hi hello oh wow yeah yes no ok okay omg lol thanks thank haha aww
    mr mrs ms dr the a an it it's its so but and or just here here's let's they we you my our
    this that these those what how when where why who if also even always see congrats btw
    anyway well sure great good nice cool awesome
    monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri
    sat sun january february march april may june july august september october november december
    """.split()
)
_PREFIX = "[{speaker}] "


# -- the scripted model -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class WindowLine:
    """One rendered message line of a prompt's window."""

    stamp: str
    speaker: str
    kind: str
    """``said``, ``shared an image``, ``action`` or ``private thought``."""
    text: str

    @property
    def moment(self) -> datetime:
        return datetime.strptime(self.stamp, _STAMP).replace(tzinfo=UTC)


def parse_window(prompt: str) -> list[WindowLine]:
    """The target lines of a prompt: the lines after the divider, or all lines without one."""
    at = prompt.find("\nMessages")
    body = prompt[prompt.index("\n", at + 1) + 1 :] if at >= 0 else prompt
    lines: list[WindowLine] = []
    target_start = 0
    for raw in body.splitlines():
        if raw[:1].isspace():  # an indented line continues the message above it
            if lines and raw.strip():
                last = lines[-1]
                text = f"{last.text} {raw.strip()}"
                lines[-1] = WindowLine(last.stamp, last.speaker, last.kind, text)
            continue
        if raw == DIVIDER:
            target_start = len(lines)
            continue
        match = _LINE.match(raw)
        if match:
            stamp, speaker, kind, text = match.groups()
            lines.append(WindowLine(stamp, speaker, kind or "said", text))
    return lines[target_start:]


def listed_entities(prompt: str) -> list[str]:
    """The names listed under ``Entities:`` in a fact prompt."""
    marker = "\nEntities:\n"
    at = prompt.find(marker)
    if at < 0:
        return []
    names = []
    for raw in prompt[at + len(marker) :].splitlines():
        if not raw.startswith("- "):
            break
        names.append(raw[2:].strip())
    return names


def _clean(text: str) -> str:
    return " ".join(text.replace("[", "").replace("]", "").split())


def _is_sentence_start(text: str, position: int) -> bool:
    return position == 0 or bool(_SENTENCE_END.search(text[:position]))


def _sentence_at(text: str, position: int, words: int = 14) -> str:
    """The sentence of ``text`` around ``position``, cut to its first ``words`` words."""
    starts = [m.end() for m in _SENTENCE_BREAK.finditer(text, 0, position)]
    end = _SENTENCE_BREAK.search(text, position)
    sentence = text[starts[-1] if starts else 0 : end.start() if end else len(text)]
    return " ".join(sentence.split()[:words])


def _is_time(name: str, moment: datetime) -> bool:
    return resolve(name, moment) is not None or bool(find_times(name, moment))


def names_in(text: str, moment: datetime) -> list[tuple[str, str]]:
    """Capitalised names in ``text`` with the sentence they occur in (leading starters dropped)."""
    found: list[tuple[str, str]] = []
    for match in _NAME_RUN.finditer(text):
        words = match.group(0).split(" ")
        offset = match.start()
        while words and (
            words[0].casefold() in _STOP or _is_sentence_start(text, offset)
        ):  # "Hey Mel" -> "Mel"; "Good to see you" -> nothing
            offset += len(words[0]) + 1
            words = words[1:]
        name = re.sub(r"['’]s$", "", " ".join(words)).strip("'’-")
        if len(name) < 2 or name.casefold() in _STOP or _is_time(name, moment):
            continue
        found.append((name, _sentence_at(text, match.start())))
    return found


def _overlaps(a: TimeSpan, b: TimeSpan) -> bool:
    """Whether two spans share an instant (open ends unbounded), as MemBrain's check reads it."""
    return (a.start is None or b.end is None or a.start < b.end) and (
        b.start is None or a.end is None or b.start < a.end
    )


def annotated(text: str, moment: datetime) -> str:
    """``text`` with its times annotated, keeping only annotations the resolver agrees with."""
    result = annotate(text, moment)
    for item in reversed(find_annotations(result)):
        expected = resolve(item.raw, moment)
        if expected is not None and not _overlaps(expected, item.span):
            result = result[: item.start] + item.raw + result[item.end :]
    return result


def _bracket(text: str, names: Sequence[str]) -> str:
    """Wrap every listed name found in ``text`` (whole words, longest first) in brackets."""
    if not names:
        return text
    alternatives = "|".join(re.escape(n) for n in sorted(set(names), key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w\[])(?:{alternatives})(?![\w\]])")
    return pattern.sub(lambda m: f"[{m.group(0)}]", text)


def fact_text(line: WindowLine, names: Sequence[str]) -> str:
    """One fact for one target line: the speaker bracketed as subject, listed names bracketed."""
    text = _bracket(_clean(line.text), names)
    subject = f"[{line.speaker}]"
    if line.kind == "shared an image":
        body = f"{subject} shared an image: {text}"
    elif line.kind == "action":
        body = f"{subject} {text}"
    elif line.kind == "private thought":
        body = f"{subject} privately thought: {text}"
    else:
        body = f"{subject} said: {text}"
    return annotated(body, line.moment)


class PromptDerivedModel:
    """A chat model (MemBrain's ``generate`` protocol) whose valid answers derive from the prompt.

    Calls are counted per step (``entities``, ``facts``, ``same``, ``profile``) in
    :attr:`calls`, their input and output tokens in :attr:`tokens`.
    """

    def __init__(self) -> None:
        steps = ("entities", "facts", "same", "profile")
        self.calls: dict[str, int] = dict.fromkeys(steps, 0)
        self.tokens: dict[str, list[int]] = {step: [0, 0] for step in steps}
        self._lock = threading.Lock()

    def generate(self, system: str, prompt: str) -> str:
        """Answer an entity, fact, same-entity or profile prompt."""
        step = ScriptedChatModel.step_of(prompt)
        if step == "same":
            answer = json.dumps({"same": [False] * len(_PAIR.findall(prompt))})
        elif step == "facts":
            answer = self._facts(prompt)
        elif step == "profile":
            answer = self._profile(prompt)
        else:
            answer = self._entities(prompt)
        with self._lock:
            self.calls[step] += 1
            self.tokens[step][0] += count_tokens(system) + count_tokens(prompt)
            self.tokens[step][1] += count_tokens(answer)
        return answer

    @staticmethod
    def _profile(prompt: str) -> str:
        for ref, text in _SHOWN.findall(prompt):
            for word, topic, subtopic in _PROFILED:
                if word in text:
                    change = {"topic": topic, "subtopic": subtopic, "text": text[:300]}
                    return json.dumps({"profile": [{**change, "facts": [ref]}]})
        return json.dumps({"profile": []})

    @staticmethod
    def _entities(prompt: str) -> str:
        lines = parse_window(prompt)
        descriptions = {
            line.speaker: f"{line.speaker}, a speaker in the conversation." for line in lines
        }
        for line in lines:
            for name, sentence in names_in(_clean(line.text), line.moment):
                if name != line.speaker:
                    descriptions.setdefault(name, f"Mentioned by {line.speaker}: {sentence}")
        return json.dumps(
            {"entities": list(descriptions), "descriptions": descriptions}, ensure_ascii=False
        )

    @staticmethod
    def _facts(prompt: str) -> str:
        names = listed_entities(prompt)
        facts = [
            {"text": fact_text(line, names), "fact_ts": line.stamp}
            for line in parse_window(prompt)
            if line.speaker in names
        ]
        return json.dumps({"facts": facts}, ensure_ascii=False)


# -- the runs ---------------------------------------------------------------------------------
@dataclass
class Usage:
    """What extraction cost over some turns."""

    turns: int = 0
    batches: int = 0
    llm_calls: int = 0
    extraction_calls: int = 0
    disambiguation_calls: int = 0
    profile_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    errors: int = 0
    facts: int = 0
    seconds: float = 0.0

    def add(self, other: Usage) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    def figures(self) -> dict[str, Any]:
        per_turn = 100 / self.turns if self.turns else float("nan")
        per_call = 1 / self.llm_calls if self.llm_calls else float("nan")
        return {
            **asdict(self),
            "retries": self.extraction_calls - 2 * self.batches,
            "calls_per_100_turns": self.llm_calls * per_turn,
            "input_tokens_per_100_turns": self.input_tokens * per_turn,
            "output_tokens_per_100_turns": self.output_tokens * per_turn,
            "input_tokens_per_call": self.input_tokens * per_call,
            "output_tokens_per_call": self.output_tokens * per_call,
        }


@dataclass
class Run:
    """One batch size over some conversations."""

    batch_size: int
    total: Usage = field(default_factory=Usage)
    per_conversation: dict[str, Usage] = field(default_factory=dict)


def ingest(conversations: Sequence[Conversation], batch_size: int, context_window: int) -> Run:
    """Add every conversation to a fresh store at ``batch_size``; what the LLM calls cost."""
    run = Run(batch_size)
    model = PromptDerivedModel()
    with (
        tempfile.TemporaryDirectory(prefix="llm-cost-") as folder,
        Memory(
            path=folder,
            dense=HashingEncoder(dim=64),
            llm=model,
            batch_size=batch_size,
            context_window=context_window,
        ) as mem,
    ):
        for number, conv in enumerate(conversations):
            name = conv.name or f"conversation-{number}"
            scope = Scope(dataset=f"locomo-{name}", task="llm-cost")
            before = dict(model.calls)
            started = time.perf_counter()
            added = mem.add(conv.messages, scope=scope)
            seconds = time.perf_counter() - started
            usage = Usage(
                turns=len(conv.messages),
                batches=math.ceil(added.messages_stored / batch_size),
                llm_calls=added.llm_calls,
                extraction_calls=sum(model.calls[s] - before[s] for s in ("entities", "facts")),
                disambiguation_calls=model.calls["same"] - before["same"],
                profile_calls=model.calls["profile"] - before["profile"],
                input_tokens=added.input_tokens,
                output_tokens=added.output_tokens,
                errors=len(added.errors),
                facts=len(mem.facts(scope=scope)),
                seconds=seconds,
            )
            run.per_conversation[name] = usage
            run.total.add(usage)
    return run


def profile_cost(
    conversations: Sequence[Conversation], flush_turns: int, context_window: int
) -> dict[str, Any]:
    """Each conversation added in flushes of ``flush_turns``: the profile's calls and tokens."""
    model = PromptDerivedModel()
    turns = entries = 0
    with (
        tempfile.TemporaryDirectory(prefix="llm-cost-profile-") as folder,
        Memory(
            path=folder, dense=HashingEncoder(dim=64), llm=model, context_window=context_window
        ) as mem,
    ):
        for number, conv in enumerate(conversations):
            scope = Scope(dataset=f"locomo-{conv.name or number}", task="llm-cost-profile")
            for start in range(0, len(conv.messages), flush_turns):
                mem.add(conv.messages[start : start + flush_turns], scope=scope)
            turns += len(conv.messages)
            entries += len(mem.profile(scope=scope))
    per_turn = 100 / turns if turns else float("nan")
    flushes = sum(math.ceil(len(c.messages) / flush_turns) for c in conversations)
    extraction = ("entities", "facts", "same")
    return {
        "flush_turns": flush_turns,
        "turns": turns,
        "flushes": flushes,
        "profile_entries": entries,
        "profile_calls_per_100_turns": model.calls["profile"] * per_turn,
        "profile_input_tokens_per_100_turns": model.tokens["profile"][0] * per_turn,
        "profile_output_tokens_per_100_turns": model.tokens["profile"][1] * per_turn,
        "extraction_calls_per_100_turns": sum(model.calls[s] for s in extraction) * per_turn,
        "extraction_input_tokens_per_100_turns": sum(model.tokens[s][0] for s in extraction)
        * per_turn,
        "extraction_output_tokens_per_100_turns": sum(model.tokens[s][1] for s in extraction)
        * per_turn,
    }


# -- the report -------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.llm_cost",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON file")
    parser.add_argument("--batch-size", nargs="+", type=int, default=[16, 32], metavar="B")
    parser.add_argument("--context-window", type=int, default=6, metavar="W")
    parser.add_argument("--limit-conversations", type=int, default=None, metavar="N")
    parser.add_argument("--flush-turns", type=int, default=20, metavar="T")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    args = parser.parse_args(argv)
    if min(args.batch_size) < 1:
        parser.error("--batch-size values must be positive")
    if args.context_window < 0:
        parser.error("--context-window must be >= 0")
    if args.flush_turns < 1:
        parser.error("--flush-turns must be positive")
    if args.limit_conversations is not None and args.limit_conversations < 1:
        parser.error("--limit-conversations must be positive")
    args.batch_size = sorted(set(args.batch_size))
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every figure of the benchmark, under stable keys."""
    conversations = [c for c in load_conversations(args.data) if c.messages][
        : args.limit_conversations
    ]
    if not conversations:
        raise SystemExit(f"{args.data}: no conversation with messages")
    runs = [ingest(conversations, size, args.context_window) for size in args.batch_size]
    first = conversations[0]
    first_name = first.name or "conversation-0"
    single = ingest([first], 1, args.context_window)
    comparison: dict[str, Any] = {"one_message_at_a_time": single.total.figures()}
    for r in runs:
        figures = r.per_conversation[first_name].figures()
        base = single.total
        figures["calls_saved_pct"] = (
            100 * (1 - figures["llm_calls"] / base.llm_calls) if base.llm_calls else float("nan")
        )
        figures["input_tokens_saved_pct"] = (
            100 * (1 - figures["input_tokens"] / base.input_tokens)
            if base.input_tokens
            else float("nan")
        )
        comparison[str(r.batch_size)] = figures
    return {
        "profile": profile_cost(conversations, args.flush_turns, args.context_window),
        "batch_size": {str(r.batch_size): r.total.figures() for r in runs},
        "per_conversation": {
            str(r.batch_size): {n: u.figures() for n, u in r.per_conversation.items()} for r in runs
        },
        "one_at_a_time": {
            "conversation": first_name,
            "batch_size": 1,
            "figures": single.total.figures(),
            "comparison": comparison,
        },
        "turns": sum(len(c.messages) for c in conversations),
        "facts": {str(r.batch_size): r.total.facts for r in runs},
        "conversations": [c.name or f"conversation-{i}" for i, c in enumerate(conversations)],
        "context_window": args.context_window,
        "model": "scripted (PromptDerivedModel): answers derived from the prompt",
        "tokenizer": "cl100k_base",
        "data": str(args.data),
    }


_HEADER = (
    "batch size",
    "batches",
    "LLM calls",
    "calls/100 turns",
    "input tok/100 turns",
    "output tok/100 turns",
    "input tok/call",
    "errors",
)


def _row(label: str, f: dict[str, Any]) -> list[str]:
    return [
        label,
        str(f["batches"]),
        str(f["llm_calls"]),
        f"{f['calls_per_100_turns']:.1f}",
        f"{f['input_tokens_per_100_turns']:,.0f}",
        f"{f['output_tokens_per_100_turns']:,.0f}",
        f"{f['input_tokens_per_call']:,.0f}",
        str(f["errors"]),
    ]


def format_report(report: dict[str, Any]) -> str:
    """The report as printed."""
    sizes = list(report["batch_size"])
    single = report["one_at_a_time"]
    name = single["conversation"]
    rows = [_row(size, report["batch_size"][size]) for size in sizes]
    comparison = single["comparison"]
    compare_rows = [
        _row(f"1 (one at a time, {name} only)", comparison["one_message_at_a_time"]),
        *(_row(f"{size} ({name} only)", comparison[size]) for size in sizes),
    ]
    extra = [
        f"{size}: {f['extraction_calls']} extraction + {f['disambiguation_calls']} "
        f"disambiguation + {f['profile_calls']} profile calls, {f['retries']} retries, "
        f"{f['facts']} facts, {f['seconds']:.1f} s"
        for size, f in report["batch_size"].items()
    ]
    one = comparison["one_message_at_a_time"]
    extra.append(
        f"1 ({name}): {one['extraction_calls']} extraction + {one['disambiguation_calls']} "
        f"disambiguation + {one['profile_calls']} profile calls, {one['retries']} retries, "
        f"{one['facts']} facts, "
        f"{one['seconds']:.1f} s"
    )
    savings = [
        f"batch size {size} vs one at a time on {name}: "
        f"{comparison[size]['calls_saved_pct']:.1f}% fewer calls, "
        f"{comparison[size]['input_tokens_saved_pct']:.1f}% fewer input tokens"
        for size in sizes
    ]
    facts = ", ".join(f"batch {s}: {n}" for s, n in report["facts"].items())
    return "\n".join(
        [
            f"LLM extraction cost on LoCoMo ({len(report['conversations'])} conversation(s), "
            f"context window {report['context_window']}; scripted model, cl100k tokens)",
            format_table(_HEADER, rows),
            "",
            f"turns: {report['turns']}; facts stored (one per rendered line; image captions are "
            f"lines of their own): {facts}",
            *extra,
            "",
            f"One message at a time (batch_size=1), first conversation ({name}) only",
            format_table(_HEADER, compare_rows),
            *savings,
            "",
            _profile_report(report["profile"]),
        ]
    )


def _profile_report(p: dict[str, Any]) -> str:
    rows = [
        [
            step,
            f"{p[f'{step}_calls_per_100_turns']:.1f}",
            f"{p[f'{step}_input_tokens_per_100_turns']:,.0f}",
            f"{p[f'{step}_output_tokens_per_100_turns']:,.0f}",
        ]
        for step in ("extraction", "profile")
    ]
    header = ("step", "calls/100 turns", "input tok/100 turns", "output tok/100 turns")
    return "\n".join(
        [
            f"The profile: {p['turns']} turns added in {p['flushes']} flushes of "
            f"{p['flush_turns']} turns (default batch size); {p['profile_entries']} entries",
            format_table(header, rows),
        ]
    )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the report, write ``--json``; return every figure."""
    args = parse_args(argv)
    report = run(args)
    print(format_report(report))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
