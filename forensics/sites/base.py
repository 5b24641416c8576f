"""The :class:`Site` interface: one site's schema and operations, checked by mypy.

Each site module ends with one ``SITE = Site(...)`` built from its own functions; the registry
(:mod:`forensics.sites`) holds those objects and every consumer reads their typed attributes.
A third-party site is a ``Site`` named by an entry point (:mod:`forensics.plugins`).

A new built-in site is one module and one registry line (``forensics/sites/__init__.py``);
no other module names it (``tests/sites/test_site_names.py``). Its module declares:

- the schema: ``name``, ``fields`` (:class:`~forensics.records.FieldSpec`, with
  ``token_ids=True`` on fields holding token ids and ``token_bound=True`` on their bound,
  for redaction), ``output_fields``, ``summary_bound``/``summary_tensor``, and optionally
  ``check_record``/``check_batch``;
- its run and its checks (required): ``run_batch(cols, patched) -> BatchRun``, the model over
  a batch of records held as columns, and ``checks(record, outcome)``, the checks of any
  variant's outcome on one record; optionally ``prepare_columns`` (the run's input, made once
  for both models), ``scan_indices`` and ``guard``. The per-record forms ``upstream``,
  ``patched``, ``run`` and ``judge`` are methods: the run on a batch of one;
- what the rest of the package reads from it: ``origin``/``origin_position`` (origin chain),
  ``adapter``/``kernel`` (the real-code variants), ``hook`` (the probe), ``feeds_sink``
  (wrong tokens fed silently), ``log_line`` (the probe line of a text log it reads into a
  summary record). Each rule is written once, in the module, and the other forms call it.

numpy only (``import forensics.sites`` stays light).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import MISSING, dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from forensics.outcome import STATUSES, Outcome
from forensics.records import Record
from forensics.schema import SiteDefinitionError, SiteSchema, check_function

if TYPE_CHECKING:

    from forensics.sites._common import RunColumns, Violation
    from forensics.sites.core import BatchRun, CheckList, Checks
    from forensics.sites.scan_counts import IndexCount, ScanColumns

P = TypeVar("P")
#: what a site's code does to a tensor at a checked index (:attr:`Site.writes`)
READ, WRITE, READ_MODIFY_WRITE = "read", "write", "read-modify-write"
#: a finding dict: ``row, element, tensor, kind, value, lower, upper, req_id``
Finding = dict[str, Any]


@dataclass(frozen=True)
class LogLine:
    """A probe line of a text log that a site reads into one summary record
    (:mod:`forensics.importers.logs`): ``pattern`` finds the line, ``fields(match, number)``
    makes the record's fields from the match, each integer read with ``number`` (the
    importer's conversion of a decimal text: one too long for int64 comes back outside it,
    and the importer refuses the line); ``counts``: the integer fields it writes besides
    ``min``, ``max`` and the bound that count or place something (a length, a row, a
    position: no token id, so redaction keeps them as they are)."""

    pattern: re.Pattern[str]
    fields: Callable[[re.Match[str], Callable[[str], int]], dict[str, Any]]
    counts: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, repr=False)
class Site(SiteSchema, Generic[P]):
    """A site: its schema (:class:`~forensics.schema.SiteSchema`), its run and its checks.

    Required operations:
        run_batch(prepared, patched) -> BatchRun: the model's run over a batch of the site's
            records held as columns (``prepared``: the columns, or what ``prepare_columns``
            made of them; ``patched`` picks the patched model): a status per record, the
            failed records' messages, every checked value, and optionally each record's
            Outcome (``BatchRun.outcome``: its outputs and accesses). The per-record forms
            (:meth:`upstream`, :meth:`patched`, :meth:`run`) are this run on a batch of one;
        checks(record, outcome) -> Checks | CheckList: the checks of any variant's outcome on
            one record (real code, user variants: their outputs, and accesses where they show
            them), as the columnar core's checks of a batch of one; :meth:`judge` reads a
            record's findings from them, or from the model's own run for a model's outcome.

    Optional operations (None when the site has no such form; the record checks
    ``check_record`` / ``check_batch`` are part of the schema):
        prepare_columns(cols) -> P: the run's input read from a batch's columns once for
            every model variant (upstream and patched share it); None: ``run_batch`` takes
            the columns themselves (a Record or a list of them is a batch too:
            :class:`~forensics.sites._common.RecordColumns`);
        scan_indices(cols) -> list[IndexCount]: the captured index checks, counted over a run
            of a batch's records held as flat columns (what ``forensics.judge.scan`` runs; see
            :mod:`forensics.sites.scan_counts`); None: the scan counts the upstream run's
            checks instead (:meth:`counted`);
        guard(...) -> Violation | None: the probe's cheaper per-call check on host values
            (arguments as the site's probe hook has them), beside the rule it mirrors and held
            to it by ``tests/probe/test_probe_guard_core.py``.

    Site knowledge beyond the operations (defaults suit a plugin site):
        origin: whether the values it writes or passes on (``out.*`` findings, summary
            findings) may be the origin of a sink finding (the sink never is one);
        origin_position: its place in the origin chain, as a position in pipeline order
            (None: its own; at equal steps the origin goes to the later place, the site
            nearer the sink); a site whose record of step ``s`` writes what only the next
            step reads sits earlier than its pipeline position;
        adapter: the dotted ``module:function`` running vLLM's own code on one record
            (:func:`forensics.variants.vllm_adapters.adapter_of`; None: no real-code
            adapter, the ``vllm`` variant raises ``NoAdapterError``);
        hook: the vLLM function the probe wraps to record the site, ``module:qualname``
            (the probe's site list; None: the probe cannot record it);
        kernel: the dotted ``module:function`` running the site's vLLM Triton kernel on one
            record's arrays in Triton's interpreter, in the kernel worker process
            (:mod:`forensics.variants.triton_kernels`: the ``vllm`` variant runs it instead
            of ``adapter``; None: the site's vLLM code is no Triton kernel);
        feeds_sink: ``(field, bound)``: the ids it hands to the sink (an ``_after`` output
            field) and the field bounding them, for :mod:`forensics.judge.wrong_tokens`
            (None: none);
        repro: ``(function, body)``: the vLLM function a standalone reproducer calls and the
            body of ``run_<site>(r)``, which calls it on the record ``r`` (decoded at run time
            from the reproducer's data file) and returns ``[(tensor, ids, allowed), ...]``, the
            ids it wrote, checked against the capture's vocabulary (:mod:`forensics.share.repro`;
            None: no reproducer);
        log_line: the probe line of a text log it reads into a summary record
            (:class:`LogLine`; None: the log importer reads none for it);
        writes: ``((tensor, how), ...)``: the tensors its code writes through a checked
            index, each with how (:data:`WRITE` or :data:`READ_MODIFY_WRITE`); any other
            tensor a finding names is read (:meth:`access_word`).
    """

    run_batch: Callable[[P, bool], BatchRun]
    checks: Callable[[Record, Outcome], Checks | CheckList]
    prepare_columns: Callable[[RunColumns], P] | None = None
    scan_indices: Callable[[ScanColumns], list[IndexCount]] | None = None
    guard: Callable[..., Violation | None] | None = None
    origin: bool = True
    origin_position: float | None = None
    adapter: str | None = None
    hook: str | None = None
    kernel: str | None = None
    feeds_sink: tuple[str, str] | None = None
    repro: tuple[str, str] | None = None
    log_line: LogLine | None = None
    writes: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in OPERATIONS:
            check_function(self, name, required=name in REQUIRED_OPERATIONS)
        self._check_knowledge()

    def _check_knowledge(self) -> None:
        """Raise SiteDefinitionError unless the plain-valued attributes have their types."""
        where = f"site {self.name!r}"
        if not isinstance(self.origin, bool):
            raise SiteDefinitionError(f"{where}: 'origin' must be a bool")
        if self.origin_position is not None and (
                isinstance(self.origin_position, bool)
                or not isinstance(self.origin_position, (int, float))):
            raise SiteDefinitionError(f"{where}: 'origin_position' must be a number or None")
        feed = self.feeds_sink
        if feed is not None and not (isinstance(feed, tuple) and len(feed) == 2
                                     and all(isinstance(f, str) for f in feed)):
            raise SiteDefinitionError(f"{where}: 'feeds_sink' must be (field, bound) or None")
        repro = self.repro
        if repro is not None and not (isinstance(repro, tuple) and len(repro) == 2
                                      and all(isinstance(f, str) for f in repro)):
            raise SiteDefinitionError(f"{where}: 'repro' must be (function, body) or None")
        if self.log_line is not None and not isinstance(self.log_line, LogLine):
            raise SiteDefinitionError(f"{where}: 'log_line' must be a LogLine or None")
        if not (isinstance(self.writes, tuple) and all(
                isinstance(w, tuple) and len(w) == 2 and isinstance(w[0], str)
                and w[1] in (WRITE, READ_MODIFY_WRITE) for w in self.writes)):
            raise SiteDefinitionError(f"{where}: 'writes' must be ((tensor, {WRITE!r} or "
                                      f"{READ_MODIFY_WRITE!r}), ...)")
        for attr in ("adapter", "hook", "kernel"):
            value = getattr(self, attr)
            if value is not None and (not isinstance(value, str) or ":" not in value):
                raise SiteDefinitionError(f"{where}: {attr!r} must be 'module:name' or None, "
                                          f"got {value!r}")

    def __repr__(self) -> str:
        return f"Site({self.name!r})"

    def access_word(self, tensor: str) -> str:
        """What its code does to ``tensor`` at a checked index: read, write or
        read-modify-write (:attr:`writes`)."""
        return dict(self.writes).get(tensor, READ)

    def judge(self, record: Record, outcome: Outcome) -> list[Finding]:
        """The finding dicts of one record's outcome (any variant's): the checks of the
        model's own run when ``outcome`` is one (:meth:`run`), else :attr:`checks`'."""
        return record_findings(self.checks_of(record, outcome), record)

    def checks_of(self, record: Record, outcome: Outcome) -> Checks | CheckList:
        """The checks of one record's outcome: those its model run made (``outcome.checks``),
        else the site's :attr:`checks` of it."""
        made = outcome.checks
        return made if made is not None else self.checks(record, outcome)

    def upstream(self, record: Record) -> Outcome:
        """The upstream model on one record: :meth:`run` unpatched."""
        return self.run(record, False)

    def patched(self, record: Record) -> Outcome:
        """The patched model on one record: :meth:`run` patched."""
        return self.run(record, True)

    def model(self, patched: bool) -> Callable[[Record], Outcome]:
        """The model on one record: ``patched`` or ``upstream``."""
        return self.patched if patched else self.upstream

    def run(self, record: Record, patched: bool) -> Outcome:
        """The model on one record (none a summary): :attr:`run_batch` on a batch of one,
        as an Outcome holding the run's checks (its outputs and accesses those of
        ``BatchRun.outcome``, none when the run gives no Outcome)."""
        run = self.run_records([record], patched)
        checks = run.checks
        if run.outcome is not None:
            return replace(run.outcome(0), checks=checks)
        return Outcome(STATUSES[int(run.status[0])], run.messages.get(0, ""), {}, [], checks)

    def run_records(self, records: Sequence[Record], patched: bool) -> BatchRun:
        """The columnar run of ``records`` (none a summary), every record's results its own
        (:meth:`BatchRun.whole`: a run that inherits records from another is resolved, so
        readers may take its checks as they are)."""
        from forensics.sites._common import RecordColumns

        run = self.run_batch(self.prepared(RecordColumns(records)), patched)
        return run if getattr(run, "base", None) is None else run.whole()  # as it is if whole

    def counted(self, records: Sequence[Record]) -> list[IndexCount]:
        """The ``out_of_bounds`` checks of the upstream run on ``records`` (none a summary),
        counted per tensor: the scan of a site without ``scan_indices``."""
        from forensics.sites.scan_counts import IndexCount

        counts: dict[str, IndexCount] = {}
        for part in self.run_records(records, False).checks.parts:
            if part.kind == 0 and len(part.value):
                count = counts.setdefault(part.tensor, IndexCount(part.tensor, 0, 0))
                count.checked += len(part.value)
                count.out_of_range += len(part.bad())
        return list(counts.values())

    def prepared(self, cols: RunColumns) -> P:
        """The run's input for the records of ``cols``: ``prepare_columns``', else the
        columns themselves."""
        if self.prepare_columns is None:
            return cast(P, cols)
        return self.prepare_columns(cols)


_SCHEMA = {f.name for f in fields(SiteSchema)}
#: what a Site knows beyond its schema and operations (plain values, not functions)
KNOWLEDGE = ("origin", "origin_position", "adapter", "hook", "kernel", "feeds_sink", "repro",
             "log_line", "writes")
#: every operation of a Site beyond its schema, required ones first
OPERATIONS = tuple(f.name for f in fields(Site) if f.name not in _SCHEMA
                   and f.name not in KNOWLEDGE)
REQUIRED_OPERATIONS = ("run_batch", "checks")
#: what a Site must be given (its schema and required operations)
REQUIRED = (*(f.name for f in fields(SiteSchema) if f.default is MISSING), *REQUIRED_OPERATIONS)


def record_findings(checks: Checks | CheckList, record: Record) -> list[Finding]:
    """The finding dicts of ``checks`` made of one record (``record``, whose ``req_ids`` name
    the requests of its rows when it has them)."""
    return checks.findings([record.get("req_ids")]).get(0, [])
