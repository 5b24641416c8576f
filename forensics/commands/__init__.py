"""One module per CLI subcommand: add_arguments(parser) and run(args) -> exit code.

:data:`COMMANDS` registers each: subcommand -> (module in this package, one-line help), in the
order ``forensics --help`` lists them.
"""

from __future__ import annotations

from forensics.errors import ConfigurationError
from forensics.registry import Registry

#: subcommand -> (module in forensics.commands, one-line help)
COMMANDS: Registry[tuple[str, str]] = Registry("command", ConfigurationError)
for _name, _entry in {
    "import": ("import_", "import foreign dumps and logs into a capture"),
    "inspect": ("inspect", "summarise a capture without replaying it"),
    "replay": ("replay", "replay a capture through variants and print verdicts"),
    "check": ("check", "compare a capture's replay with its expected.json"),
    "plot": ("plot", "draw figures of a capture's replay (one or more kinds)"),
    "report": ("report", "write a self-contained HTML report of a capture"),
    "simulate": ("simulate", "generate a synthetic capture of a scenario"),
    "demo": ("demo", "replay every bundled capture and write reports"),
    "shrink": ("shrink", "the fewest steps and records of a capture with the same evidence"),
    "redact": ("redact", "a copy of a capture fit to share, with the same evidence"),
    "summary": ("summary", "write up a capture's replay for a bug thread or pull request"),
    "findings": ("findings", "export a capture's findings (CSV, Parquet, JSON lines)"),
    "known": ("known", "vLLM's known failure signatures, and which of them a capture matches"),
    "repro": ("repro", "write a standalone pytest reproducer for vLLM maintainers"),
    "schema": ("schema", "the fields, shapes and dtypes forensics import reads per site"),
    "triage": ("triage", "replay many captures at once and group them by signature"),
    "kernels": ("kernels", "replay recorded Triton kernel launches with every access checked"),
}.items():
    COMMANDS.register(_name, _entry)
