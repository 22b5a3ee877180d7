from __future__ import annotations

import pytest
from pydantic import BaseModel

from cacao_tui.llm.structured import StructuredOutputError, extract_json, parse_structured, schema_instructions


class Plan(BaseModel):
    steps: list[str]
    budget: int = 1


@pytest.mark.parametrize(
    "text",
    [
        '{"steps": ["a"]}',
        'Here you go:\n```json\n{"steps": ["a"]}\n```\nGood luck.',
        '```\n{"steps": ["a"]}\n```',
        'Sure. {"steps": ["a"]} Hope that helps.',
    ],
)
def test_json_is_found_in_common_reply_shapes(text: str) -> None:
    assert parse_structured(text, Plan) == Plan(steps=["a"])


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "empty"),
        ("I cannot do that.", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"steps": "a", "budget": "x"}', "steps: Input should be a valid list; budget:"),
    ],
)
def test_errors_are_written_for_the_model(text: str, error: str) -> None:
    with pytest.raises(StructuredOutputError, match=error):
        parse_structured(text, Plan)


def test_instructions_carry_the_schema() -> None:
    text = schema_instructions(Plan)
    assert '"steps"' in text and "JSON schema" in text
    assert extract_json('{"a": 1}') == {"a": 1}


def test_the_optional_field_rule_only_where_the_schema_has_one() -> None:
    """A trial's player read "null for an optional field" beside a schema that has none (strategize)."""
    from cacao_tui.llm.structured import format_instructions, native_schema
    from cacao_tui.nodes.decide import DecisionReply
    from cacao_tui.nodes.strategize import StrategyList

    assert "optional" not in format_instructions("StrategyList", native_schema(StrategyList))
    assert "null for an optional field" in format_instructions("DecisionReply", native_schema(DecisionReply))
