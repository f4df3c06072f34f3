"""The ``boolean`` path: a structured BM25 query (AND/OR, phrases, fields) on the tantivy index.

With a model, the model writes the query; it is checked with tantivy's lenient parser and, when
it does not parse, sent back once with the parser's complaints. Without a model, or when the model
fails or keeps writing invalid queries, the query is built deterministically:

* the question's content words (question words, auxiliaries and stopwords dropped), OR-ed, on
  ``text`` and ``entities``;
* every multi-word capitalised name ("Golden Gate Bridge") as a phrase on ``entities`` and
  ``text``, boosted, so the exact name outranks its words scattered over a fact;
* the times the question names as ``year:`` / ``month:`` / ``day:`` terms (ranges for spans of
  several units), boosted by grain.

All clauses are SHOULD: the path is for recall, and BM25 ranks the facts matching most. What it
adds to the ``bm25`` and ``dense`` paths: exact phrases, and times matched by their resolved
value, so "in May 2023" finds a fact written "[last month::2023-05]".
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from membrain.api.models import Precision, Scope, TimeSpan
from membrain.api.path_names import BOOLEAN
from membrain.backends.lexical import LexicalIndex, time_keys, validate_query
from membrain.extraction.jsonout import MalformedOutput, parse_json_object
from membrain.extraction.llm import LLMCallError, LLMClient
from membrain.retrieval.base import Ranked, SearchContext

__all__ = ["BOOLEAN_QUERY_PROMPT", "BooleanPath", "deterministic_query", "llm_query"]

logger = logging.getLogger("membrain.retrieval")

BOOLEAN_QUERY_PROMPT = """\
You turn a question into a search query for a full-text index of facts remembered from
conversations. Each fact is one short sentence, for example:
"Sara booked the photo shoot at the Golden Gate Bridge in May 2023."

Query syntax:
- plain words match the sentence or the names in it: shoot lisbon
- "quoted words" match that exact phrase: "photo shoot"
- AND, OR, NOT (upper case) and parentheses combine clauses: (shoot OR photo) AND lisbon
- field:value searches one field:
    text:      the sentence (words are stemmed: booking matches booked)
    entities:  names of the people, places and things the fact mentions: entities:"Golden Gate"
    year:2023  month:2023-05  day:2023-05-07   when the fact happened
    ranges:    month:[2023-03 TO 2023-06]  year:[2019 TO *]
- clause^2 makes a clause count twice as much.

Write one query that finds the facts answering the question. Use OR between alternative words
and synonyms; use AND only for what every answer must contain. Quote multi-word names. Use
year:, month: and day: only for times the question names. Reply with the query alone on one
line, without explanation."""

_RETRY = """\
The query you wrote:
{query}
is not valid: {errors}
Write a corrected query, alone on one line."""

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?")
_QUESTION_WORDS = frozenset("what when where which who whom whose why how whats".split())
_STOPWORDS = frozenset(
    """
    a an the of to in on at for with about from by as and or but not no nor if then than so
    do does did done doing is are was were be been being am has have had having will would can
    could should shall may might must get got ever also just still yet very really
    i me my mine myself you your yours we us our ours he him his she her hers they them their
    theirs it its this that these those there here some any all each every other another
    kind kinds type types sort thing things something anything one ones much many more most
    s t ll ve re d m tell know think like since before after while during until ago happen
    happened happens
    """.split()
)
_NAME_LINKS = frozenset({"of", "the", "de", "la", "le", "van", "von", "da", "du", "del"})
_FINE = (Precision.DAY, Precision.DATETIME)
_NAME_BOOST = (3, 2)  # entities, text
_TIME_BOOST = {"day": 3, "month": 2, "year": 1}
_MAX_ATTEMPTS = 2
_EPSILON = timedelta(microseconds=1)
_THINK = re.compile(r"<(think|thinking|reasoning)>.*?(?:</\1>|\Z)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[^\n]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_LABEL = re.compile(r"^\s*(?:search\s+)?query\s*[:=]\s*", re.IGNORECASE)

Validator = Callable[[str], list[str]]


def _names(question: str) -> list[str]:
    """Multi-word capitalised names ("Golden Gate Bridge", "Lord of the Rings")."""
    words = [(m.group(0).replace("’", "'"), m.start()) for m in _WORD.finditer(question)]
    names: dict[str, None] = {}
    run: list[str] = []

    def close() -> None:
        while run and run[-1].casefold() in _NAME_LINKS:
            run.pop()
        if len(run) > 1:
            names.setdefault(" ".join(run), None)
        run.clear()

    previous_end = 0
    for word, start in words:
        gap = question[previous_end:start]
        if gap.strip():  # punctuation between the words breaks a name
            close()
        previous_end = start + len(word)
        bare = word.removesuffix("'s")
        if bare[:1].isupper() and bare.casefold() not in _QUESTION_WORDS | _STOPWORDS:
            run.append(bare)
            if bare != word:  # "Golden Gate's ..." ends the name
                close()
        elif run and word.casefold() in _NAME_LINKS:
            run.append(word.casefold())
        else:
            close()
    close()
    return list(names)


def _keywords(question: str) -> list[str]:
    seen: dict[str, None] = {}
    for match in _WORD.finditer(question.replace("’", "'")):
        word = match.group(0).casefold().removesuffix("'s")
        for part in word.split("'"):
            if part and part not in _STOPWORDS and part not in _QUESTION_WORDS:
                seen.setdefault(part, None)
    return list(seen)


def _level(field: str, first: str, last: str) -> str:
    boost = _TIME_BOOST[field]
    if first == last:
        return f"{field}:{first}^{boost}"
    return f"{field}:[{first} TO {last}]^{boost}"


def _month(value: datetime) -> str:
    return f"{value.year:04d}-{value.month:02d}"


def _time_clauses(span: TimeSpan) -> list[str]:
    """``day``/``month``/``year`` clauses for a span, down to its precision, coarsest last."""
    if span.start is not None and span.end is not None:
        first, last = span.start, span.end - _EPSILON
        clauses = []
        if span.precision in _FINE:
            clauses.append(_level("day", first.date().isoformat(), last.date().isoformat()))
        if span.precision is not Precision.YEAR:
            clauses.append(_level("month", _month(first), _month(last)))
        clauses.append(_level("year", f"{first.year:04d}", f"{last.year:04d}"))
        return clauses
    # An open interval ("since May 2023", "before 2020"): a range from its known endpoint.
    keys = time_keys(span)
    clauses = []
    for field, values in (("day", keys.days), ("month", keys.months), ("year", keys.years)):
        if values:
            bounds = f"[{values[0]} TO *]" if span.end is None else f"[* TO {values[0]}]"
            clauses.append(f"{field}:{bounds}^{_TIME_BOOST[field]}")
    return clauses


def deterministic_query(question: str, times: Sequence[TimeSpan] = ()) -> str:
    """A query built from the question's words, names and times; it always parses.

    Example:
        >>> deterministic_query("Did Sara visit Lake Tahoe?")
        'entities:"Lake Tahoe"^3 OR text:"Lake Tahoe"^2 OR sara OR visit OR lake OR tahoe'
    """
    clauses: list[str] = []
    for name in _names(question):
        clauses += [f'entities:"{name}"^{_NAME_BOOST[0]}', f'text:"{name}"^{_NAME_BOOST[1]}']
    clauses += _keywords(question)
    for span in times:
        clauses += [c for c in _time_clauses(span) if c not in clauses]
    return " OR ".join(clauses)


def _clean(reply: str) -> str:
    """The query in a model reply: fences, thinking, labels and JSON wrappers removed."""
    text = _THINK.sub("", reply).strip()
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1).strip()
    if text.startswith("{"):
        try:
            value = parse_json_object(text).get("query")
        except MalformedOutput:
            value = None
        if isinstance(value, str):
            text = value
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    text = _LABEL.sub("", " ".join(lines)).strip()
    if len(text) > 1 and text[0] == text[-1] == "`":
        text = text.strip("`").strip()
    return text


def llm_query(
    client: LLMClient,
    question: str,
    times: Sequence[TimeSpan] = (),
    *,
    validate: Validator = validate_query,
) -> str | None:
    """A query written by the model, or ``None`` when it fails or keeps writing invalid ones.

    The model gets the question (and the times it names, resolved); a query that ``validate``
    rejects is sent back once with the problems found.
    """
    prompt = f"Question: {question}"
    spans = [c for span in times for c in _time_clauses(span)]
    if spans:
        prompt += "\nTimes the question names, as query clauses: " + " ".join(spans)
    for attempt in range(_MAX_ATTEMPTS):
        try:
            reply = client.call(BOOLEAN_QUERY_PROMPT, prompt).text
        except LLMCallError as exc:
            logger.warning("boolean path: the model wrote no query (%s); using keywords", exc)
            return None
        query = _clean(reply)
        problems = validate(query) if query else ["the reply holds no query"]
        if not problems:
            return query
        logger.info("boolean path: invalid query %r (attempt %d): %s", query, attempt + 1, problems)
        prompt += "\n\n" + _RETRY.format(query=query or reply, errors="; ".join(problems))
    return None


class BooleanPath:
    """The ``boolean`` path: a structured query on the lexical index (see the module docstring).

    The query it ran is left in ``ctx.extra["boolean.query"]`` (``"boolean.by_llm"``: whether a
    model wrote it). A model-written query that finds nothing is followed by the deterministic one.

    Args:
        index: The lexical index of facts.
        sync: Brings the index up to date with the record store before it is searched
            (:class:`~membrain.records.LexicalSync`); ``None`` trusts the index as it is.
    """

    name = BOOLEAN

    def __init__(
        self, index: LexicalIndex, *, sync: Callable[[Scope], object] | None = None
    ) -> None:
        self.index = index
        self.sync = sync

    def run(self, ctx: SearchContext) -> list[Ranked]:
        """Fact ids of ``ctx.scope`` matching the query, best BM25 score first.

        The index holds ids, not facts: the searcher reads the facts of those that rank.
        """
        if ctx.limit <= 0:
            return []
        if self.sync is not None:
            self.sync(ctx.scope)
        if ctx.llm is not None:
            query = llm_query(ctx.llm, ctx.question, ctx.times, validate=self.index.validate)
            if query is not None:
                hits = self.index.search(ctx.scope, query, limit=ctx.limit)
                if hits:
                    ctx.extra.update({"boolean.query": query, "boolean.by_llm": True})
                    return [Ranked(i, score) for i, score in hits]
        query = deterministic_query(ctx.question, ctx.times)
        ctx.extra.update({"boolean.query": query, "boolean.by_llm": False})
        return [
            Ranked(i, score) for i, score in self.index.search(ctx.scope, query, limit=ctx.limit)
        ]
