"""The agent-chat benchmark (``benchmarks.agent_memory``): its data, its scoring, a tiny run."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks import agent_memory as bench
from membrain.api.models import Fact, MemoryHit, Scope
from membrain.temporal import plain_text

CHATS = bench.load_chats(bench.DATA)
SMALL = CHATS[:2]


def test_the_data_is_labelled_consistently_and_large_enough() -> None:
    assert bench.check_chats(CHATS) == []
    assert len(CHATS) >= 10
    assert len({c.user for c in CHATS}) == len(CHATS)
    for chat in CHATS:
        assert 15 <= len(chat.turns) <= 30, chat.id
        assert len(chat.sessions) >= 3, chat.id
        assert any(t.chatter for t in chat.turns) and any(not t.chatter for t in chat.turns)
    questions = [q for c in CHATS for q in c.questions]
    assert len(questions) >= 60
    assert {q.kind for q in questions} == set(bench.KINDS)
    for chat in CHATS:  # every stale belief is a scripted fact a later one replaces
        facts = [plain_text(f.text) for t in chat.turns for f in t.facts]
        replaces = [f.replaces for t in chat.turns for f in t.facts if f.replaces]
        for q in chat.questions:
            if q.kind in ("current", "plan"):
                stale = [f for f in facts if bench.contains(q.stale, f)]
                stale = [f for f in stale if not bench.contains(q.answer, f)]
                assert stale and all(any(bench.contains(r, f) for r in replaces) for f in stale)


@pytest.mark.parametrize("name", ["agent_chats_heldout.json", "agent_chats_heldout2.json"])
def test_the_held_out_sets_are_labelled_consistently(name: str) -> None:
    chats = bench.load_chats(bench.DATA.parent / name)
    assert bench.check_chats(chats) == []
    assert len(chats) == 6 and len({c.user for c in chats}) == 6
    assert {q.kind for c in chats for q in c.questions} == set(bench.KINDS)


def test_the_data_check_finds_a_bad_label() -> None:
    chat = CHATS[0]
    turn = chat.turns[0]
    bad_turn = bench.Turn(turn.id, turn.speaker, turn.text, turn.time, chatter=False)
    bad_question = bench.Question(chat.id, "current", "Where?", ("Atlantis",), ())
    bad = bench.Chat(
        chat.id, chat.user, ((bad_turn, *chat.sessions[0][1:]), *chat.sessions[1:]), (bad_question,)
    )
    problems = bench.check_chats([bad])
    assert any("content has no facts" in p for p in problems)
    assert any("no turn contains the answer" in p for p in problems)
    assert any("no stale keywords" in p for p in problems)


def test_keywords_match_whole_words_and_alternatives() -> None:
    assert bench.contains(["vancouver"], "Maya just moved to Vancouver.")
    assert bench.contains(["Japan", "October"], "The Japan trip is pushed to October.")
    assert not bench.contains(["Japan", "May"], "Maya's trip to Japan is in October.")
    assert bench.contains(["peanut|peanuts"], "Daniel is allergic to peanuts.")
    assert not bench.contains(["Ana"], "Maya likes bananas.")
    assert not bench.contains([], "anything")
    assert bench.is_question("How is Pepper? Is he well?")
    assert not bench.is_question("Ana is a nurse. Did her visit go well?")


def _hit(text: str, sources: tuple[str, ...]) -> MemoryHit:
    fact = Fact(
        id="f-" + text,
        scope=Scope(dataset="agent-x", task="bench"),
        text=text,
        stated_at="2024-01-01T00:00:00Z",
        recorded_at="2024-01-01T00:00:00Z",
        sources=sources,
        extractor="test",
    )
    return MemoryHit(fact=fact, score=1.0)


def test_scoring_of_one_current_question() -> None:
    question = bench.Question("x", "current", "Where does Maya live?", ("Vancouver",), ("Toronto",))
    hits = [
        _hit("[Maya] lives in [Toronto].", ("m1",)),
        _hit("How is [Maya] liking [Vancouver]?", ("m2",)),
        _hit("[Maya] moved from [Toronto] to [Vancouver].", ("m3",)),
        _hit("Haha ok", ("m4",)),
    ]
    figures = bench.ModeFigures()
    bench.score_question(figures, question, hits, chatter_ids={"m4"})
    detail = figures.details[0]
    assert (detail["rank_current"], detail["rank_stale"]) == (2, 1)
    assert figures.current_at_1 == 0 and figures.stale_at_1 == 1
    assert figures.current_above_stale == 0
    assert detail["chatter_top_3"] == [False, True, False]  # the question, not the 4th hit
    assert figures.chatter_hits == 1 and figures.questions_with_chatter == 1

    figures = bench.ModeFigures()
    bench.score_question(figures, question, hits[2:], chatter_ids={"m4"})
    assert figures.current_at_1 == 1 and figures.current_above_stale == 1  # both words: current


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], str]:
    """Two conversations, offline, hashing encoder: exit code, JSON report, printed report."""
    folder = tmp_path_factory.mktemp("agent")
    out = folder / "report.json"
    argv = ["--conversations", "2", "--hashing", "--settings", "offline"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = bench.main([*argv, "--path", str(folder / "stores"), "--json", str(out)])
    return code, json.loads(out.read_text(encoding="utf-8")), printed.getvalue()


def _in_range(entry: dict[str, Any], of: int) -> None:
    assert entry["of"] == of and 0 <= entry["count"] <= of
    assert entry["share"] == pytest.approx(entry["count"] / of)


def test_two_conversations_offline_print_consistent_figures(
    small_run: tuple[int, dict[str, Any], str],
) -> None:
    code, report, printed = small_run
    assert code == 0
    questions = [q for c in SMALL for q in c.questions]
    turns = bench._turns(SMALL)
    kinds = {k: sum(q.kind == k for q in questions) for k in bench.KINDS}
    assert report["conversations"] == [c.id for c in SMALL]
    assert report["questions"] == {"total": len(questions), "per_kind": kinds}
    assert report["turns"]["total"] == len(turns)
    assert report["turns"]["chatter"] == sum(t.chatter for t in turns)
    assert list(report["settings"]) == ["offline"]

    rows = [line.split() for line in printed.splitlines() if line.startswith("offline ")]
    assert [row[1] for row in rows] == list(bench.MODES)
    assert all(row[-1] == str(len(questions)) for row in rows)

    ingest = report["settings"]["offline"]["ingest"]
    assert ingest["turns"] == len(turns) and ingest["chatter_turns"] == sum(
        t.chatter for t in turns
    )
    assert ingest["extraction_errors"] == 0 and ingest["unprocessed_messages"] == 0
    assert ingest["facts"] > 0
    assert ingest["facts_per_turn"] == pytest.approx(ingest["facts"] / len(turns))
    assert ingest["discarded_turns"] <= ingest["turns_without_facts"] <= len(turns)
    assert ingest["discarded_share"] == pytest.approx(ingest["discarded_turns"] / len(turns))
    assert ingest["audit_discarded_events"] == ingest["messages_with_discards"] > 0
    assert 0 < ingest["superseded_facts"] < ingest["facts"]  # Maya's move, offline

    current = kinds["current"] + kinds["plan"]
    for mode, m in report["settings"]["offline"]["modes"].items():
        assert m["questions"] == len(questions) == len(m["per_question"]), mode
        for key in ("current_belief_at_1", "current_above_stale_at_10", "stale_at_1"):
            _in_range(m[key], current)
        _in_range(m["stable_at_1"], kinds["stable"])
        _in_range(m["stable_at_5"], kinds["stable"])
        _in_range(m["chatter_hit_share_top_3"], 3 * len(questions))
        _in_range(m["questions_with_chatter_top_3"], len(questions))
        assert m["current_belief_at_1"]["count"] <= m["current_above_stale_at_10"]["count"]
        assert m["current_belief_at_1"]["count"] + m["stale_at_1"]["count"] <= current
        assert m["stable_at_1"]["count"] <= m["stable_at_5"]["count"]
        assert m["chatter_hits_top_3"] == m["chatter_hit_share_top_3"]["count"]
        assert m["questions_with_chatter_top_3"]["count"] <= m["chatter_hits_top_3"]


def test_the_scripted_model_writes_the_labelled_facts(tmp_path: Path) -> None:
    chats = CHATS[:1]
    report = bench.run_setting("scripted", chats, ["fast"], tmp_path / "store", hashing=True)
    ingest, scripted = report["ingest"], report["ingest"]["scripted"]
    turns = bench._turns(chats)
    assert ingest["facts"] == sum(len(t.facts) for t in turns)
    assert ingest["chatter_turns_with_facts"] == 0 and ingest["content_turns_without_facts"] == 0
    assert ingest["extraction_errors"] == 0 and scripted["unknown_window_lines"] == 0
    assert scripted["llm_calls"] == {"entities": 4, "facts": 4}  # one batch per session
    assert scripted["replacements_named"] == scripted["replacements_intended"] > 0
    assert ingest["superseded_facts"] == scripted["replacements_intended"]
    assert report["modes"]["fast"]["chatter_hits_top_3"] == 0


def test_the_chat_surfaces_extract_what_a_whole_add_extracts(tmp_path: Path) -> None:
    argv = ["--conversations", "2", "--hashing", "--settings", "offline", "--modes", "fast"]
    argv += ["--surface", *bench.SURFACES, "--path", str(tmp_path / "stores")]
    out = tmp_path / "report.json"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert bench.main([*argv, "--json", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    names = ["offline", "offline/chat_history", "offline/writer_node"]
    assert list(report["settings"]) == names
    assert [line.split()[0] for line in printed.getvalue().splitlines()[3:6]] == names
    whole = report["settings"]["offline"]
    for name in names:
        ingest, fast = report["settings"][name]["ingest"], report["settings"][name]["modes"]["fast"]
        assert ingest["extraction_errors"] == 0 and ingest["unprocessed_messages"] == 0
        assert fast["chatter_hits_top_3"] == 0, name
        assert ingest["chatter_turns_with_facts"] == whole["ingest"]["chatter_turns_with_facts"]
        assert ingest["superseded_facts"] == whole["ingest"]["superseded_facts"], name
