"""Reading a recorded prompt in tests: its opening turn is a stable prefix (the problem brief,
the analysis, ...) then the task, as two user messages; tests read them as one text."""

from __future__ import annotations


def opening(record: dict) -> str:
    """The opening user turn(s) of a call record (as JSON) joined into the prompt's text."""
    texts = []
    for m in record["messages"]:
        if m["role"] != "user":
            break
        texts.append(m["content"])
    return "\n\n".join(texts)
