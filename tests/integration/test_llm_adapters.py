"""The model adapters against the frameworks' own fake models (no network)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from langchain_core.language_models.chat_models import BaseChatModel  # noqa: TID251
from langchain_core.language_models.fake_chat_models import (  # noqa: TID251
    FakeListChatModel,
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage, BaseMessage  # noqa: TID251
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: TID251
from langchain_core.runnables import RunnableLambda  # noqa: TID251
from llama_index.core.llms import (  # noqa: TID251
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    MockLLM,
)

from membrain.api.errors import ConfigurationError, ExtractionError
from membrain.api.tokens import count_tokens
from membrain.extraction.llm import (
    ChatModel,
    LLMCallError,
    LLMClient,
    LLMReply,
    Usage,
    as_llm_client,
)

SYSTEM = "You extract facts. Answer with JSON."
PROMPT = "Sara: I adopted a cat named Miso yesterday."
ANSWER = '{"facts": ["[Sara] adopted a cat named [Miso]."]}'
SCHEMA: dict[str, Any] = {
    "title": "Facts",
    "description": "Facts stated in the conversation.",
    "type": "object",
    "properties": {"facts": {"type": "array", "items": {"type": "string"}}},
    "required": ["facts"],
}
COUNTED_IN = count_tokens(SYSTEM) + count_tokens(PROMPT)


# LangChain -----------------------------------------------------------------------------------


class RecordingChatModel(BaseChatModel):
    """Answers with ``answer`` and records the messages it was given."""

    answer: str = ANSWER
    seen: list[list[BaseMessage]] = []

    @property
    def _llm_type(self) -> str:
        return "recording"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.seen.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self.answer))])


class TimeoutChatModel(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "timeout"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        raise TimeoutError("the provider did not answer within 30 s")


class StructuredChatModel(BaseChatModel):
    """A fake with native structured output: ``with_structured_output`` returns a Runnable."""

    parsed: dict[str, Any] | None = None
    parsing_error: str | None = None
    raw_content: str = ""
    requests: list[tuple[dict[str, Any], dict[str, Any]]] = []

    @property
    def _llm_type(self) -> str:
        return "structured"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        raise AssertionError("plain invoke must not be used when structured output works")

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:
        self.requests.append((schema, kwargs))

        def answer(_: Any) -> dict[str, Any]:
            raw = AIMessage(
                content=self.raw_content,
                usage_metadata={"input_tokens": 40, "output_tokens": 9, "total_tokens": 49},
            )
            error = ValueError(self.parsing_error) if self.parsing_error else None
            return {"raw": raw, "parsed": self.parsed, "parsing_error": error}

        return RunnableLambda(answer)


class CountingFakeListChatModel(FakeListChatModel):
    """FakeListChatModel (no native structured output) counting structured-output attempts."""

    attempts: ClassVar[list[dict[str, Any]]] = []

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:
        type(self).attempts.append(kwargs)
        return super().with_structured_output(schema, **kwargs)


class TypeErrorStructuredModel(RecordingChatModel):
    def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:
        raise TypeError("unexpected keyword argument 'method'")


def test_langchain_reported_usage_is_used() -> None:
    message = AIMessage(
        content=ANSWER,
        usage_metadata={"input_tokens": 123, "output_tokens": 45, "total_tokens": 168},
    )
    client = as_llm_client(GenericFakeChatModel(messages=iter([message])))
    reply = client.call(SYSTEM, PROMPT)
    assert client.kind == "langchain"
    assert reply == LLMReply(text=ANSWER, input_tokens=123, output_tokens=45)
    assert client.usage.snapshot() == Usage(calls=1, input_tokens=123, output_tokens=45)


def test_langchain_tokens_counted_when_not_reported_and_usage_accumulates() -> None:
    # FakeListChatModel answers with plain AIMessages: usage_metadata is None.
    client = as_llm_client(FakeListChatModel(responses=[ANSWER, "[]"]))
    first = client.call(SYSTEM, PROMPT)
    second = client.call(SYSTEM, PROMPT)
    assert first == LLMReply(ANSWER, COUNTED_IN, count_tokens(ANSWER))
    assert second == LLMReply("[]", COUNTED_IN, count_tokens("[]"))
    assert client.usage.snapshot() == Usage(
        calls=2,
        input_tokens=2 * COUNTED_IN,
        output_tokens=count_tokens(ANSWER) + count_tokens("[]"),
    )


def test_langchain_mixed_usage_accumulates() -> None:
    messages = iter(
        [
            AIMessage(
                content="a", usage_metadata=dict(input_tokens=7, output_tokens=2, total_tokens=9)
            ),
            "b",
        ]
    )
    client = as_llm_client(GenericFakeChatModel(messages=messages))
    client.call(SYSTEM, PROMPT)
    client.call(SYSTEM, PROMPT)
    assert client.usage.snapshot() == Usage(
        calls=2, input_tokens=7 + COUNTED_IN, output_tokens=2 + count_tokens("b")
    )


def test_langchain_gets_system_and_human_messages() -> None:
    model = RecordingChatModel(seen=[])
    as_llm_client(model).call(SYSTEM, PROMPT)
    [messages] = model.seen
    assert [(m.type, m.content) for m in messages] == [("system", SYSTEM), ("human", PROMPT)]


def test_langchain_content_blocks_are_joined() -> None:
    content: list[str | dict[str, Any]] = [
        {"type": "reasoning", "reasoning": "thinking..."},
        {"type": "text", "text": '{"facts": '},
        '["a"]}',
    ]
    client = as_llm_client(GenericFakeChatModel(messages=iter([AIMessage(content=content)])))
    assert client.call(SYSTEM, PROMPT).text == '{"facts": ["a"]}'


def test_langchain_timeout_becomes_llm_call_error() -> None:
    client = as_llm_client(TimeoutChatModel())
    with pytest.raises(LLMCallError) as info:
        client.call(SYSTEM, PROMPT)
    error = info.value
    assert isinstance(error, ExtractionError)
    assert isinstance(error.__cause__, TimeoutError)
    assert error.raw_output == ""
    assert "langchain" in str(error)
    assert "TimeoutError" in str(error)
    # The failed call is counted, with the tokens it was sent.
    assert client.usage.snapshot() == Usage(1, count_tokens(SYSTEM) + count_tokens(PROMPT), 0)


def test_structured_output_unsupported_falls_back_once() -> None:
    CountingFakeListChatModel.attempts.clear()
    client = as_llm_client(CountingFakeListChatModel(responses=[ANSWER]))
    first = client.call(SYSTEM, PROMPT, schema=SCHEMA)
    second = client.call(SYSTEM, PROMPT, schema=SCHEMA)
    assert first == second == LLMReply(ANSWER, COUNTED_IN, count_tokens(ANSWER))
    # NotImplementedError on the first attempt is remembered: no second attempt.
    assert CountingFakeListChatModel.attempts == [{"method": "json_schema", "include_raw": True}]


def test_structured_output_type_error_falls_back() -> None:
    client = as_llm_client(TypeErrorStructuredModel(seen=[]))
    reply = client.call(SYSTEM, PROMPT, schema=SCHEMA)
    assert reply.text == ANSWER
    assert reply.parsed is None


def test_structured_output_parsed_is_used() -> None:
    parsed = {"facts": ["[Sara] adopted a cat named [Miso]."]}
    model = StructuredChatModel(parsed=parsed, requests=[])
    client = as_llm_client(model)
    reply = client.call(SYSTEM, PROMPT, schema=SCHEMA)
    assert reply == LLMReply(
        text=json.dumps(parsed), input_tokens=40, output_tokens=9, parsed=parsed
    )
    client.call(SYSTEM, PROMPT, schema=SCHEMA)
    # The structured runnable is built once per schema and reused.
    assert model.requests == [(SCHEMA, {"method": "json_schema", "include_raw": True})]
    assert client.usage.snapshot() == Usage(calls=2, input_tokens=80, output_tokens=18)


def test_structured_output_parsing_error_returns_raw_text() -> None:
    model = StructuredChatModel(
        parsed=None, parsing_error="bad json", raw_content='{"facts": ["a",]}', requests=[]
    )
    reply = as_llm_client(model).call(SYSTEM, PROMPT, schema=SCHEMA)
    assert reply == LLMReply(text='{"facts": ["a",]}', input_tokens=40, output_tokens=9)


def test_schema_is_ignored_without_it() -> None:
    model = StructuredChatModel(parsed={"facts": []}, requests=[])
    with pytest.raises(LLMCallError):  # plain invoke of this fake raises AssertionError
        as_llm_client(model).call(SYSTEM, PROMPT)
    assert model.requests == []


# LlamaIndex ----------------------------------------------------------------------------------


def make(cls: type[MockLLM], **fields: Any) -> Any:
    """An instance of a MockLLM subclass (MockLLM.__init__ takes no extra fields)."""
    model = cls()
    for name, value in fields.items():
        setattr(model, name, value)
    return model


class CannedCompleteLLM(MockLLM):
    """A user's MockLLM subclass that only overrides ``complete``."""

    prompts: list[str] = []
    raw: Any = None

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return CompletionResponse(text=ANSWER, raw=self.raw)


class CannedChatLLM(MockLLM):
    """A user's MockLLM subclass that overrides ``chat``."""

    raw: Any = None
    extra: dict[str, Any] = {}
    seen: list[list[ChatMessage]] = []

    def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        self.seen.append(list(messages))
        return ChatResponse(
            message=ChatMessage(role="assistant", content=ANSWER),
            raw=self.raw,
            additional_kwargs=self.extra,
        )


class FailingLLM(MockLLM):
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise TimeoutError("read timed out")


def test_llamaindex_mock_llm_complete_override_works_through_chat() -> None:
    # CustomLLM.chat formats the messages with messages_to_prompt and calls complete().
    model = make(CannedCompleteLLM, prompts=[])
    client = as_llm_client(model)
    reply = client.call(SYSTEM, PROMPT)
    assert client.kind == "llamaindex"
    assert reply == LLMReply(ANSWER, COUNTED_IN, count_tokens(ANSWER))
    [prompt] = model.prompts
    assert prompt == f"system: {SYSTEM}\nuser: {PROMPT}\nassistant: "


def test_llamaindex_plain_mock_llm_echoes_the_prompt() -> None:
    reply = as_llm_client(MockLLM()).call(SYSTEM, PROMPT)
    assert reply.text == f"system: {SYSTEM}\nuser: {PROMPT}\nassistant: "
    assert reply.input_tokens == COUNTED_IN


@pytest.mark.parametrize(
    "raw",
    [
        {"usage": {"prompt_tokens": 31, "completion_tokens": 12, "total_tokens": 43}},
        {"usage": {"input_tokens": 31, "output_tokens": 12}},
        {"usage_metadata": {"prompt_token_count": 31, "candidates_token_count": 12}},
        SimpleNamespace(usage=SimpleNamespace(prompt_tokens=31, completion_tokens=12)),
    ],
    ids=["openai-dict", "anthropic-dict", "gemini-dict", "openai-object"],
)
def test_llamaindex_completion_raw_usage_is_used(raw: Any) -> None:
    client = as_llm_client(make(CannedCompleteLLM, prompts=[], raw=raw))
    assert client.call(SYSTEM, PROMPT) == LLMReply(ANSWER, 31, 12)


def test_llamaindex_chat_response_raw_usage_and_messages() -> None:
    model = make(
        CannedChatLLM, raw={"usage": {"prompt_tokens": 8, "completion_tokens": 3}}, seen=[]
    )
    client = as_llm_client(model)
    assert client.call(SYSTEM, PROMPT) == LLMReply(ANSWER, 8, 3)
    [messages] = model.seen
    assert [(m.role.value, m.content) for m in messages] == [
        ("system", SYSTEM),
        ("user", PROMPT),
    ]


def test_llamaindex_additional_kwargs_usage_is_used() -> None:
    model = make(CannedChatLLM, extra={"prompt_tokens": 5, "completion_tokens": 2}, seen=[])
    assert as_llm_client(model).call(SYSTEM, PROMPT) == LLMReply(ANSWER, 5, 2)


def test_llamaindex_partial_usage_counts_the_rest() -> None:
    model = make(CannedChatLLM, raw={"usage": {"prompt_tokens": 8}}, seen=[])
    assert as_llm_client(model).call(SYSTEM, PROMPT) == LLMReply(ANSWER, 8, count_tokens(ANSWER))


def test_llamaindex_error_becomes_llm_call_error() -> None:
    with pytest.raises(LLMCallError, match="llamaindex.*TimeoutError") as info:
        as_llm_client(FailingLLM(max_tokens=None)).call(SYSTEM, PROMPT)
    assert isinstance(info.value.__cause__, TimeoutError)


# MemBrain protocol ---------------------------------------------------------------------------


class StrModel:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def generate(self, system: str, prompt: str) -> str:
        self.calls.append((system, prompt))
        return ANSWER


class ReplyModel:
    def generate(self, system: str, prompt: str) -> LLMReply:
        return LLMReply(text=ANSWER, input_tokens=1000, output_tokens=20, parsed={"facts": []})


class BadReturnModel:
    def generate(self, system: str, prompt: str) -> Any:
        return None


def test_protocol_str_reply_is_counted() -> None:
    model = StrModel()
    assert isinstance(model, ChatModel)
    client = as_llm_client(model)
    assert client.kind == "membrain"
    assert client.call(SYSTEM, PROMPT) == LLMReply(ANSWER, COUNTED_IN, count_tokens(ANSWER))
    assert model.calls == [(SYSTEM, PROMPT)]


def test_protocol_llm_reply_is_taken_as_is() -> None:
    client = as_llm_client(ReplyModel())
    reply = client.call(SYSTEM, PROMPT, schema=SCHEMA)
    assert reply == LLMReply(ANSWER, 1000, 20, parsed={"facts": []})
    assert client.usage.snapshot() == Usage(calls=1, input_tokens=1000, output_tokens=20)


def test_protocol_bad_return_is_llm_call_error() -> None:
    with pytest.raises(LLMCallError, match="membrain.*TypeError") as info:
        as_llm_client(BadReturnModel()).call(SYSTEM, PROMPT)
    assert isinstance(info.value.__cause__, TypeError)


def test_usage_is_thread_safe() -> None:
    client = as_llm_client(ReplyModel())
    threads = [
        threading.Thread(target=lambda: [client.call("s", "p") for _ in range(50)])
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert client.usage.snapshot() == Usage(calls=400, input_tokens=400_000, output_tokens=8000)


def test_debug_log_per_call(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="membrain.llm"):
        as_llm_client(ReplyModel()).call(SYSTEM, PROMPT)
    [record] = [r for r in caplog.records if r.name == "membrain.llm"]
    assert record.getMessage() == (
        "llm call kind=membrain tokens_in=1000 tokens_out=20 structured=True"
    )


# Recognition ---------------------------------------------------------------------------------


def test_llm_client_is_returned_as_is() -> None:
    client = as_llm_client(StrModel())
    assert as_llm_client(client) is client


def test_langchain_model_is_not_taken_for_the_protocol() -> None:
    model = FakeListChatModel(responses=["x"])
    assert callable(model.generate)  # LangChain chat models have a generate() of their own
    assert as_llm_client(model).kind == "langchain"


@pytest.mark.parametrize(
    "model",
    [object(), "gpt-4o", None, SimpleNamespace(generate="not callable")],
    ids=["object", "str", "none", "non-callable-generate"],
)
def test_unsupported_model_is_a_configuration_error(model: object) -> None:
    with pytest.raises(ConfigurationError, match="LangChain chat model.*LlamaIndex LLM.*generate"):
        as_llm_client(model)


@pytest.mark.parametrize("model", [FakeListChatModel, MockLLM, StrModel], ids=lambda m: m.__name__)
def test_a_class_instead_of_an_instance_is_a_configuration_error(model: type) -> None:
    # A model class has a callable generate() attribute: it must not pass as the protocol.
    with pytest.raises(ConfigurationError, match=f"got the class {model.__name__}; pass an"):
        as_llm_client(model)


def test_llm_client_constructor_validates_too() -> None:
    with pytest.raises(ConfigurationError):
        LLMClient(42)


def test_importing_the_adapters_loads_no_framework() -> None:
    code = (
        "import sys\n"
        "import membrain.extraction.llm as llm\n"
        "class M:\n"
        "    def generate(self, system, prompt):\n"
        "        return 'ok'\n"
        "llm.as_llm_client(M()).call('s', 'p')\n"
        "bad = sorted(m for m in sys.modules\n"
        "             if m.split('.')[0] in {'langchain', 'langchain_core', 'langgraph',"
        " 'llama_index'})\n"
        "print(bad)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == "[]"
