from __future__ import annotations

import subprocess
import sys

import membrain

EXPECTED = {
    "AsyncRemoteMemory",
    "MemoryLike",
    "RemoteAccessError",
    "RemoteMemory",
    "Actor",
    "ActorKind",
    "AddResult",
    "AuditAction",
    "AuditEvent",
    "FactHistory",
    "ProfileEntry",
    "ProfileSchema",
    "PurgeResult",
    "Recall",
    "RecalledFact",
    "ReviewItem",
    "ReviewKind",
    "ReviewPolicy",
    "AnnotationError",
    "AsyncMemory",
    "ChatModel",
    "BackendError",
    "ConfigurationError",
    "ConflictError",
    "Context",
    "ContextRecipe",
    "Entity",
    "EntityVersion",
    "EntityView",
    "ErasureCheck",
    "ErasureFinding",
    "ErasureReceipt",
    "EvidenceHit",
    "ExpiryRule",
    "ExtractionError",
    "Fact",
    "FactStatus",
    "InputError",
    "LLMReply",
    "Layer",
    "MembrainError",
    "MembrainSettings",
    "Memory",
    "MemoryHit",
    "Message",
    "MessageStatus",
    "MissingDependencyError",
    "ModelFileError",
    "NotFoundError",
    "Prompts",
    "Precision",
    "RecordListener",
    "RetrievalMode",
    "Role",
    "Scope",
    "ScopeError",
    "StoreInUseError",
    "SearchResult",
    "StoredMessage",
    "TimeCheck",
    "TimeSpan",
    "Trust",
    "__version__",
}


def test_all_is_pinned() -> None:
    assert set(membrain.__all__) == EXPECTED
    for name in membrain.__all__:
        assert hasattr(membrain, name), name


def test_errors_share_one_root() -> None:
    for name in membrain.__all__:
        obj = getattr(membrain, name)
        if isinstance(obj, type) and name.endswith("Error"):
            assert issubclass(obj, membrain.MembrainError), name


def test_import_loads_no_framework() -> None:
    code = (
        "import sys, membrain, membrain.cli, membrain.aio, membrain.background;"
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('langchain', 'langchain_core', 'langgraph', 'llama_index')];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_the_module_paths_of_earlier_versions_import_the_same_modules() -> None:
    import importlib

    from membrain._former_paths import FORMER_PATHS

    for former, current in FORMER_PATHS.items():
        assert importlib.import_module(former) is importlib.import_module(current), former
    from membrain.models import Fact  # type: ignore[import-not-found]
    from membrain.storage.edge import EdgeBackend  # type: ignore[import-not-found]

    assert Fact is membrain.Fact
    assert EdgeBackend is importlib.import_module("membrain.backends.edge").EdgeBackend
    former_main = subprocess.run(
        [sys.executable, "-m", "membrain.mcp_server", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert former_main.returncode == 0 and "--dataset" in former_main.stdout
