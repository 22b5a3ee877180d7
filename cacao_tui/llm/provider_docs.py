"""The tables of docs/PROVIDERS.md, rendered from the provider registry.

``python -m cacao_tui.llm.provider_docs`` prints them between the markers the docs use;
a test checks that the docs hold exactly these tables.
"""

from __future__ import annotations

import sys

from cacao_tui.llm import registry


def _code(values: tuple[str, ...] | list[str], sep: str = " or ") -> str:
    return sep.join(f"`{v}`" for v in values)


def providers_markdown() -> str:
    rows = [
        "| provider | what it talks to | aliases | key variables (first set wins) | endpoint variable "
        "| default model | SDK | temperature |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in registry.PROVIDERS:
        base = "" if p.base_var is None else f"`{p.base_var}`" + (" (required)" if p.base_required else "")
        keys = _code(p.key_vars) or "none"
        if p.key_optional_with_base:
            keys += " (optional with a custom endpoint)"
        if not p.takes_temperature:
            temperature = "not sent"
        elif p.no_temperature:
            rules = ", ".join(_temperature_rule(r) for r in p.no_temperature)
            temperature = f"sent, except for {rules}"
        else:
            temperature = "sent"
        rows.append(
            f"| {p.name} | {p.title} | {_code(p.aliases, ', ')} | {keys} | {base} "
            f"| `{p.default_model}` | {p.sdk or 'none'} | {temperature} |"
        )
    return "\n".join(rows)


def temperatures_markdown() -> str:
    rows = ["| model name contains | creative | precise |", "|---|---|---|"]
    for family, t in registry.TEMPERATURE_FAMILIES:
        rows.append(f"| `{family}` | {t.creative:g} | {t.precise:g} |")
    default = registry.DEFAULT_TEMPERATURES
    rows.append(f"| anything else | {default.creative:g} | {default.precise:g} |")
    return "\n".join(rows)


def prices_markdown() -> str:
    rows = ["| provider | model | input | output | cache read | cache write |", "|---|---|---|---|---|---|"]
    for p in registry.PROVIDERS:
        for model, price in p.prices.items():
            write = "-" if price.cache_write is None else f"{price.cache_write:g}"
            rows.append(
                f"| {p.name} | `{model}` | {price.input:g} | {price.output:g} | {price.cached_input:g} | {write} |"
            )
    return "\n".join(rows)


DOC_TABLES = {
    "providers": providers_markdown,
    "temperatures": temperatures_markdown,
    "prices": prices_markdown,
}


def _temperature_rule(rule: str) -> str:
    """A no_temperature rule as a pattern: ``*codex*`` (contains), ``gpt-5`` (exactly), ``o1*`` (starts with)."""
    if rule.startswith("*"):
        return f"`*{rule[1:]}*`"
    if rule.startswith("="):
        return f"`{rule[1:]}`"
    return f"`{rule}*`"


def main() -> int:
    for name, render in DOC_TABLES.items():
        sys.stdout.write(f"<!-- registry:{name} -->\n{render()}\n<!-- /registry:{name} -->\n\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
