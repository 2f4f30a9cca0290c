"""Markdown for an OpenAPI 3.1 schema: one section per endpoint (method, path, what it does,
authentication, parameters, request body, responses) and one per schema it names.

Used by the ``rest_api`` hook; it knows nothing of the service, only the schema's dictionary
and, per operation, a sentence on its authentication.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Schema = Mapping[str, Any]
HTTP_METHODS = ("get", "post", "put", "patch", "delete")


@dataclass(frozen=True)
class HiddenRoute:
    """A route the service answers but leaves out of its schema (a probe, a form, a file)."""

    method: str
    path: str
    summary: str
    auth: str


def anchor(method: str, path: str) -> str:
    """The page anchor of an endpoint: ``post-api-v1-submissions``."""
    return re.sub(r"[^a-z0-9]+", "-", f"{method} {path}".lower()).strip("-")


def schema_anchor(name: str) -> str:
    """The page anchor of a named schema."""
    return "schema-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def code(text: str) -> str:
    """``text`` as inline code that survives a table cell (a pipe inside backticks would show
    its escape)."""
    if "|" in text or "`" in text:
        return f"<code>{html.escape(text).replace('|', '&#124;')}</code>"
    return f"`{text}`"


def prose(text: str) -> str:
    """A docstring's first paragraph on one line, reStructuredText's ````x```` as ```x```, a
    pipe escaped for a table cell."""
    first = re.split(r"\n\s*\n", text.strip(), maxsplit=1)[0]
    first = re.sub(r"``([^`]+)``", r"`\1`", " ".join(first.split()))
    return _escape_pipes(first)


def _escape_pipes(text: str) -> str:
    """Pipes outside inline code as ``&#124;``; a code span holding one becomes ``<code>``."""
    parts = re.split(r"(`[^`]+`)", text)
    return "".join(
        code(part[1:-1])
        if part.startswith("`") and part.endswith("`") and len(part) > 1
        else part.replace("|", "&#124;")
        for part in parts
    )


def type_of(schema: Schema) -> str:
    """A schema's type in words, a named schema as a link to its section."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{schema_anchor(name)})"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(dict.fromkeys(type_of(option) for option in schema[key]))
    if "const" in schema:
        return f"{code(literal(schema['const']))} (always)"
    if "enum" in schema:
        return "one of " + ", ".join(code(literal(value)) for value in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {type_of(schema.get('items', {}))}"
    if "format" in schema:
        return f"{kind} ({schema['format']})"
    return str(kind)


def constraints(schema: Schema) -> str:
    """A field's limits and default, in words (empty when it has none)."""
    words = []
    for key, text in (("minimum", "at least {}"), ("maximum", "at most {}"),
                      ("minLength", "at least {} character"),
                      ("maxLength", "at most {} character")):  # fmt: skip
        if key in schema:
            plural = "s" if key.endswith("Length") and schema[key] != 1 else ""
            words.append(text.format(schema[key]) + plural)
    if schema.get("default") not in ("", None):
        words.append(f"default {code(literal(schema['default']))}")
    return "; ".join(words)


def literal(value: Any) -> str:
    """A JSON value as a client writes it (``true``, not ``True``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def described(description: str, schema: Schema) -> str:
    """A field's description followed by its limits and default."""
    return "; ".join(part for part in (prose(description), constraints(schema)) if part)


def table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> list[str]:
    """A Markdown table (empty cells as a dash)."""
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(cell or "-" for cell in row) + " |" for row in rows]
    return [*lines, ""]


def parameters(operation: Schema) -> list[str]:
    """The operation's path, query and header parameters as a table."""
    rows = [(code(item["name"]), item["in"], type_of(item.get("schema", {})),
             "yes" if item.get("required") else "no",
             described(item.get("description", ""), item.get("schema", {})))
            for item in operation.get("parameters", [])]  # fmt: skip
    if not rows:
        return []
    return ["**Parameters**", "", *table(("name", "in", "type", "required", "description"), rows)]


def fields(schema: Schema) -> list[tuple[str, ...]]:
    """An object schema's properties (and pattern-named properties) as table rows."""
    required = set(schema.get("required", []))
    rows = [(code(name), type_of(field), "yes" if name in required else "no",
             described(field.get("description", ""), field))
            for name, field in schema.get("properties", {}).items()]  # fmt: skip
    rows += [(f"a name matching {code(pattern)}", type_of(field), "no",
              described(field.get("description", ""), field))
             for pattern, field in schema.get("patternProperties", {}).items()]  # fmt: skip
    return rows


def request_body(operation: Schema) -> list[str]:
    """The operation's request body: its media type, then its schema's fields or its name."""
    body = operation.get("requestBody")
    if not body:
        return []
    lines = ["**Request body**", ""]
    for media, content in body.get("content", {}).items():
        schema = content.get("schema", {})
        rows = fields(schema)
        lines += [f"{code(media)}: {type_of(schema) if not rows else 'the parts below'}", ""]
        lines += table(("field", "type", "required", "description"), rows) if rows else []
    return lines


def response_body(response: Schema) -> str:
    """A response's media types and schemas in words."""
    parts = []
    for media, content in response.get("content", {}).items():
        schema = content.get("schema") or {}
        shown = type_of(schema) if schema else ""
        parts.append(f"{code(media)} {shown}".strip() if shown != "any" else code(media))
    return ", ".join(parts)


def responses(operation: Schema, extra: Mapping[str, str]) -> list[str]:
    """The operation's responses by status code, with the authentication's (``extra``)."""
    answers = {code_: (prose(item.get("description", "")), response_body(item))
               for code_, item in operation.get("responses", {}).items()}  # fmt: skip
    for code_, text in extra.items():
        answers.setdefault(code_, (text, ""))
    rows = [(code_, *answers[code_]) for code_ in sorted(answers)]
    return ["**Responses**", "", *table(("status", "meaning", "body"), rows)]


@dataclass(frozen=True)
class Auth:
    """What an operation asks of its caller: a sentence, and the statuses it answers for it."""

    text: str
    statuses: Mapping[str, str]


def operation_section(method: str, path: str, operation: Schema, auth: Auth) -> list[str]:
    """One endpoint's section."""
    summary = prose(operation.get("description") or operation.get("summary", ""))
    return [
        f"### {code(method.upper() + ' ' + path)} {{#{anchor(method, path)}}}",
        "",
        summary,
        "",
        f"**Authentication**: {auth.text}",
        "",
        *parameters(operation),
        *request_body(operation),
        *responses(operation, auth.statuses),
    ]


def operations(schema: Schema) -> list[tuple[str, str, Schema]]:
    """Every (method, path, operation) of the schema, in the schema's order."""
    return [(method, path, operation)
            for path, item in schema.get("paths", {}).items()
            for method, operation in item.items() if method in HTTP_METHODS]  # fmt: skip


def tag_of(operation: Schema) -> str:
    """The group an operation is listed under (its first tag)."""
    return (operation.get("tags") or ["other"])[0]


def endpoint_index(schema: Schema, auths: Mapping[tuple[str, str], Auth]) -> list[str]:
    """A table of every endpoint: method and path (linked), what it does, who may call it."""
    rows = [(f"[{code(method.upper() + ' ' + path)}](#{anchor(method, path)})",
             prose(operation.get("description") or operation.get("summary", "")),
             auths[(method.upper(), path)].text)
            for method, path, operation in operations(schema)]  # fmt: skip
    return ["## Endpoints", "", *table(("endpoint", "what it does", "authentication"), rows)]


def endpoint_sections(schema: Schema, auths: Mapping[tuple[str, str], Auth]) -> list[str]:
    """The endpoints' sections, grouped by tag in the order the tags first appear."""
    groups: dict[str, list[tuple[str, str, Schema]]] = {}
    for method, path, operation in operations(schema):
        groups.setdefault(tag_of(operation), []).append((method, path, operation))
    lines: list[str] = []
    for tag, members in groups.items():
        lines += [f"## {tag.capitalize()}", ""]
        for method, path, operation in members:
            lines += operation_section(method, path, operation, auths[(method.upper(), path)])
    return lines


def hidden_routes(routes: Iterable[HiddenRoute]) -> list[str]:
    """The routes outside the schema, as a table."""
    rows = [(code(f"{route.method} {route.path}"), prose(route.summary), route.auth)
            for route in routes]  # fmt: skip
    if not rows:
        return []
    return ["## Routes outside the schema", "",
            "The same process also answers these, left out of the schema: a readiness probe for "
            "load balancers, the pages' stylesheet and plots, the organiser page's forms.", "",
            *table(("route", "what it does", "authentication"), rows)]  # fmt: skip


def schema_sections(schema: Schema) -> list[str]:
    """One section per named schema: its description and fields (or its values)."""
    lines = ["## Schemas", ""]
    for name, item in schema.get("components", {}).get("schemas", {}).items():
        lines += [f"### {code(name)} {{#{schema_anchor(name)}}}", ""]
        if item.get("description"):
            lines += [prose(item["description"]), ""]
        rows = fields(item)
        lines += table(("field", "type", "required", "description"), rows) if rows else [
            f"{type_of(item)}.", ""]  # fmt: skip
    return lines


def render(schema: Schema, auths: Mapping[tuple[str, str], Auth],
           hidden: Iterable[HiddenRoute] = ()) -> str:  # fmt: skip
    """The whole reference: the endpoints' index, their sections, the routes outside the
    schema and the schemas.

    Args:
        schema: the OpenAPI schema (``FastAPI.openapi()``).
        auths: per (METHOD, path) of the schema, what the operation asks of its caller.
        hidden: the routes the service answers outside the schema.

    Returns:
        Markdown, headings from level 2.
    """
    lines = [*endpoint_index(schema, auths), *endpoint_sections(schema, auths),
             *hidden_routes(hidden), *schema_sections(schema)]  # fmt: skip
    return "\n".join(lines) + "\n"
