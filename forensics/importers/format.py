"""The import format, per site, from the site schema: fields, kinds, shapes and dtypes, as data
(``forensics schema --json``), terminal text (``forensics schema``) and the docs page
(``docs/import-format.md``, written by ``forensics schema --markdown``; a test keeps it equal).
"""

from __future__ import annotations

from typing import Any

from forensics.records import FieldSpec

#: what a dump holds for each field kind: (Python/torch value, dtype)
KIND_VALUES = {
    "tensor": ("integer tensor or array", "any int"),
    "int": ("Python int or 0-d integer tensor", "int64 range"),
    "str_list": ("list of str", "-"),
    "opt_str_list": ("list of str or None (None: a discarded row)", "-"),
    "index_map": ("dict of str to int", "int64 range"),
    "ragged": ("list of lists of int (one list per batch row)", "int64 range"),
}
#: the keys every record carries beside its site's fields
RECORD_KEYS = (
    ("site", "str", "yes", "the site name"),
    ("step", "int >= 0", "yes", "the engine step of the call"),
    ("rank", "int >= 0", "no (0)", "the tensor-parallel rank"),
    ("summary", "bool", "no (false)", "true: a summary record (min, max, bound) only"),
)

WORKED_EXAMPLE = '''import torch

records = [
    {"site": "embedding", "step": 13, "input_ids": torch.tensor([11, 42, 7], dtype=torch.int64),
     "num_embeddings": 248320},
    {"site": "embedding", "step": 14, "input_ids": torch.tensor([11, 248320, 7]),
     "num_embeddings": 248320},
    {"site": "embedding", "step": 15, "summary": True, "min": -1, "max": 9,
     "num_embeddings": 248320},
]
torch.save(records, "dump.pt")'''
WORKED_COMMANDS = ("forensics import dump.pt -o incident.capture --set versions.vllm=0.31.0 "
                   "--set model.name=Qwen/Qwen3-8B\nforensics replay incident.capture")


def shape_of(spec: FieldSpec) -> str:
    """The field's shape as its ``doc`` states it (``[p, k]``), else its rank (``1-d``)."""
    doc = spec.doc.strip()
    if doc.startswith("["):
        return doc.split("]", 1)[0] + "]"
    if spec.kind == "tensor":
        return f"{spec.ndim}-d"
    return "-"


def note_of(spec: FieldSpec) -> str:
    """The field's description: its ``doc`` after the shape."""
    doc = spec.doc.strip()
    return doc.split("]", 1)[1].strip() if doc.startswith("[") else doc


def site_format(name: str) -> dict[str, Any]:
    """The import format of site ``name`` as plain data (raises UnknownSiteError)."""
    from forensics.sites import get_site as site_schema

    schema = site_schema(name)
    specs = {spec.name: spec for spec in schema.fields}
    fields = [_field(spec, spec.name, spec.required, note_of(spec)) for spec in schema.fields]
    fields += [_field(specs[out], f"{out}_after", False, f"{out} after the call")
               for out in schema.output_fields]
    return {"site": name, "fields": fields,
            "summary": {"fields": ["min", "max", schema.summary_bound],
                        "describes": schema.summary_tensor}}


def _field(spec: FieldSpec, name: str, required: bool, doc: str) -> dict[str, Any]:
    """One field's row: ``spec``'s kind, shape and dtype under ``name``."""
    value, dtype = KIND_VALUES[spec.kind]
    return {"name": name, "kind": spec.kind, "required": required, "shape": shape_of(spec),
            "value": value, "dtype": _dtype(spec, dtype), "doc": doc}


def _dtype(spec: FieldSpec, default: str) -> str:
    """The dtype the ``doc`` names (``int32``), else the kind's."""
    words = spec.doc.replace("]", " ").split()
    named = [w for w in words if w.startswith(("int", "uint")) and w[-1].isdigit()]
    return named[0] if named else default


def formats(sites: list[str] | None = None) -> list[dict[str, Any]]:
    """:func:`site_format` of ``sites`` (default: every registered site, in pipeline order),
    each site once, in the order first named."""
    from forensics.sites import SITES

    return [site_format(name) for name in dict.fromkeys(sites or SITES)]


def as_text(data: list[dict[str, Any]]) -> str:
    """The formats as terminal text: one block per site, one line per field."""
    lines: list[str] = []
    for site in data:
        lines.append(f"{site['site']}:")
        width = max(len(f["name"]) for f in site["fields"])
        for f in site["fields"]:
            need = "required" if f["required"] else "optional"
            note = f"  {f['doc']}" if f["doc"] else ""
            lines.append(f"  {f['name']:<{width}}  {f['kind']:<12} {f['shape']:<8} "
                         f"{f['dtype']:<11} {need}{note}")
        summary = site["summary"]
        lines.append(f"  summary record: {', '.join(summary['fields'])} (of "
                     f"{summary['describes']})")
    lines.append("every record: site, step, optional rank (0) and summary (false); tensors "
                 "of any int dtype; see docs/import-format.md")
    return "\n".join(lines)


def as_markdown(data: list[dict[str, Any]]) -> str:
    """The docs page ``docs/import-format.md``."""
    out = [
        "# Import format",
        "",
        "<!-- generated by `forensics schema --markdown > docs/import-format.md`; "
        "do not edit by hand -->",
        "",
        "`forensics import` reads `.pt` (a dict or a list of dicts, loaded with "
        "`torch.load(weights_only=True)`), `.safetensors` and `.npz` (one record each), and "
        "text logs. Each record is one call of one site: the keys below, and the site's fields.",
        "`forensics schema [SITE]` prints the same tables; `--json` gives them as data.",
        "",
        "| key | type | required | meaning |",
        "|---|---|---|---|",
        *(f"| `{k}` | {t} | {r} | {m} |" for k, t, r, m in RECORD_KEYS),
        "",
        "Field kinds: " + "; ".join(f"`{kind}`: {value}" for kind, (value, _) in
                                    KIND_VALUES.items()) + ".",
        "A field `F_after` holds `F` after the call (output fields only); a summary record "
        "carries only `min`, `max` and the site's bound.",
        "",
        "## Worked example (.pt)",
        "",
        "```python",
        WORKED_EXAMPLE,
        "```",
        "",
        "```sh",
        WORKED_COMMANDS,
        "```",
        "",
        "Facts the dump does not carry are recorded as `unknown`; give them with "
        "`--set KEY=VALUE`.",
        "Each value must fit its fact as every reader checks it (`forensics/manifest_facts.py`): a",
        "version spelled as vLLM's releases are, counts in ASCII digits from 1 (draft tokens "
        "from 0)",
        "to 2147483647, `true`/`false` for a flag, text of at most 256 characters (`notes`: "
        "any).",
    ]
    for site in data:
        out += ["", f"## {site['site']}", "", "| field | kind | shape | dtype | required | "
                "meaning |", "|---|---|---|---|---|---|"]
        out += [f"| `{f['name']}` | {f['kind']} | {f['shape']} | {f['dtype']} | "
                f"{'yes' if f['required'] else 'no'} | {f['doc']} |" for f in site["fields"]]
        summary = site["summary"]
        out += ["", f"Summary record: `{'`, `'.join(summary['fields'])}` (the range of "
                f"`{summary['describes']}`)."]
    from forensics.kernels.format import MARKDOWN

    out += ["", *MARKDOWN.rstrip("\n").split("\n")]
    return "\n".join(out) + "\n"
