"""Run a notebook in this process, through IPython's shell, and keep its outputs as nbformat
outputs (what papermill and a kernel would give, without starting one).

A report's notebook ran in a Jupyter kernel through papermill: most of a small capture's report
time went to importing papermill (jsonschema's format checkers compile a grammar at import) and
to starting the kernel and importing everything again in it. Here the cells run in
``IPython.core.interactiveshell.InteractiveShell`` (the shell a kernel wraps) with a fresh
namespace, figures are shown at the end of each cell as the inline backend shows them: the SVG
figures a report's views drew (:mod:`forensics.present.svg`), then pyplot's open figures as PNG
(one draw instead of two: :func:`figure_png`), a
cell's last expression is displayed as a rich output (HTML tables), and stderr is dropped.
A v4 notebook is read as plain JSON into :class:`Node` (nbformat's import is a tenth of a small
report's time); an older one goes through nbformat's conversion. matplotlib is not imported
here: only a cell that imports pyplot pays for it (on the Agg backend, through ``MPLBACKEND``).
"""

from __future__ import annotations

import base64
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from forensics.budget import alarm_deadline, child_deadline
from forensics.errors import ConfigurationError, reason
from forensics.escaping import terminal
from forensics.present import svg

PARAMETERS_TAG, INJECTED_TAG = "parameters", "injected-parameters"


class CellError(RuntimeError):
    """A cell raised: ``number`` (1-based among code cells), the exception's type and text."""

    def __init__(self, number: int, ename: str, evalue: str) -> None:
        super().__init__(f"cell {number}: {ename}: {evalue}")
        self.number, self.ename, self.evalue = number, ename, evalue


class Node(dict):  # type: ignore[type-arg]
    """A notebook's JSON object with attribute access (``nb.cells``, ``cell.source``), as
    nbformat's NotebookNode gives."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


def as_node(value: Any) -> Any:
    """``value`` (parsed JSON) with every object a :class:`Node`, sources joined to strings."""
    if isinstance(value, dict):
        node = Node({key: as_node(item) for key, item in value.items()})
        if isinstance(node.get("source"), list):
            node["source"] = "".join(node["source"])
        return node
    if isinstance(value, list):
        return [as_node(item) for item in value]
    return value


def read_notebook(path: Path) -> Any:
    """The notebook at ``path`` as a v4 notebook of :class:`Node` (a v3 one through nbformat,
    jsonschema's format checkers left unloaded: their import alone takes seconds).

    Raises:
        ConfigurationError: the file is no notebook (not JSON, not UTF-8, cells without a type
            or source text, metadata or tags of another kind); the message names the file and
            what is wrong.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("it is not a JSON object")
        if data.get("nbformat") == 4:
            return _checked(as_node(data))
        sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
        import nbformat

        try:
            converted = nbformat.writes(nbformat.read(str(path), as_version=4))
        except nbformat.ValidationError as exc:
            raise ValueError(f"nbformat refuses it: {exc.message}") from None
        return _checked(as_node(json.loads(converted)))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ConfigurationError(
            f"notebook '{terminal(path)}' cannot be run: {reason(exc)}; give a Jupyter notebook "
            f"(.ipynb) whose cells each have a cell_type and a source, as Jupyter saves "
            f"it") from None


def _checked(nb: Any) -> Any:
    """``nb`` when its cells, metadata and tags are of the kinds a notebook's are (a missing
    metadata is added empty).

    Raises:
        ValueError: naming the first field that is not.
    """
    if not isinstance(nb.setdefault("metadata", Node()), dict):
        raise ValueError("its 'metadata' is not an object")
    if not isinstance(nb.get("cells"), list):
        raise ValueError("its 'cells' is not a list")
    for number, cell in enumerate(nb.cells, 1):
        if not (isinstance(cell, dict) and isinstance(cell.get("cell_type"), str)
                and isinstance(cell.get("source"), str)):
            raise ValueError(f"cell {number} has no 'cell_type' or no 'source' text")
        tags = cell.setdefault("metadata", Node()).get("tags", []) if isinstance(
            cell.get("metadata", {}), dict) else None
        if not (isinstance(tags, list) and all(isinstance(tag, str) for tag in tags)):
            raise ValueError(f"cell {number}'s 'metadata' or its 'tags' is not of its kind")
    return nb


def inject_parameters(nb: Any, parameters: dict[str, Any]) -> None:
    """Insert a cell assigning ``parameters`` after the cell tagged ``parameters`` (first when
    none is), tagged ``injected-parameters`` as papermill tags it."""
    source = "\n".join(f"{name} = {value!r}" for name, value in parameters.items())
    cell = Node(cell_type="code", execution_count=None, source=source, outputs=[],
                metadata=Node(tags=[INJECTED_TAG]))
    at = next((i + 1 for i, c in enumerate(nb.cells)
               if PARAMETERS_TAG in c.get("metadata", {}).get("tags", [])), 0)
    nb.cells.insert(at, cell)


def execute(nb: Any, cwd: Path, on_cell: Callable[[int], object] | None = None) -> Any:
    """Run every code cell of ``nb`` in order, in ``cwd``; fill in its outputs; return ``nb``.
    ``on_cell(number)`` is called as each code cell starts (a heartbeat).

    Raises CellError at the first cell that raises (or does not compile).
    """
    number = 0
    with _main_module_kept(), _working_directory(cwd), _callers_figures_aside(), \
            _agg_backend():
        shell = _shell()
        for cell in nb.cells:
            if cell.get("cell_type") != "code":
                continue
            number += 1
            if on_cell is not None:
                on_cell(number)
            cell.outputs = _run_cell(shell, cell.source, number)
            cell.execution_count = number
    return nb


@contextmanager
def _main_module_kept() -> Iterator[None]:
    """The process's ``__main__`` module put back after the block: IPython's shell installs a
    module of its own there, without ``__spec__``, and ``multiprocessing``'s spawn start (a
    local triage's workers) then fails in the calling process."""
    main = sys.modules.get("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


@contextmanager
def _callers_figures_aside() -> Iterator[None]:
    """pyplot's figures open in the calling process are set aside while the notebook runs (its
    cells then draw on figures of their own, and only theirs are shown), and put back after."""
    if "matplotlib.pyplot" not in sys.modules:
        yield
        return
    from matplotlib._pylab_helpers import Gcf  # pyplot's own table of open figures

    callers = dict(Gcf.figs)
    Gcf.figs.clear()
    try:
        yield
    finally:
        Gcf.figs.update(callers)


def _run_cell(shell: Any, source: str, number: int) -> list[Any]:
    """Run one cell; return its outputs (stdout, then rich outputs and figures)."""
    from IPython.utils.capture import capture_output

    with capture_output(stdout=True, stderr=True, display=True) as captured:
        with alarm_deadline(child_deadline(), past_waits=True):
            result = shell.run_cell(source, store_history=True)
        _show_figures()
    error = result.error_before_exec or result.error_in_exec
    if error is not None:
        raise CellError(number, type(error).__name__, str(error))
    return _outputs(captured)


def _show_figures() -> None:
    """Display the figures the cell drew, in order: the SVG ones (:func:`svg.take_figures`),
    then pyplot's open ones as PNG (only when a cell imported pyplot), which are closed (the
    caller's are set aside meanwhile: :func:`_callers_figures_aside`)."""
    from IPython.display import display

    for figure in svg.take_figures():
        display({"image/svg+xml": figure.to_svg()}, raw=True)
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        for number in plt.get_fignums():
            display({"image/png": figure_png(plt.figure(number))}, raw=True)
        plt.close("all")


def figure_png(figure: Any) -> bytes:
    """``figure`` as PNG bytes from one Agg draw: the draw runs the figure's layout engine
    itself, where ``savefig`` draws twice (once to lay out, once to render), and the PNG is
    written at zlib level 1 (a tenth of a figure's time at level 6, for 5-10% more bytes)."""
    from io import BytesIO

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    width, height = canvas.get_width_height(physical=True)
    image = Image.frombuffer("RGBA", (width, height), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    out = BytesIO()
    image.save(out, format="png", compress_level=1)
    return out.getvalue()


def _outputs(captured: Any) -> list[Any]:
    """Notebook outputs of one cell's captured stdout and rich outputs."""
    outputs = []
    if captured.stdout:
        outputs.append(Node(output_type="stream", name="stdout", text=captured.stdout))
    for rich in captured.outputs:
        if not rich.data:  # an object that displayed itself (or chose not to be shown)
            continue
        data = {mime: _json_value(value) for mime, value in rich.data.items()}
        outputs.append(Node(output_type="display_data", data=Node(data),
                            metadata=Node(rich.metadata or {})))
    return outputs


def _json_value(value: Any) -> Any:
    """A display value as a notebook holds it: binary images base64-encoded."""
    return base64.b64encode(value).decode("ascii") if isinstance(value, bytes) else value


def _shell() -> Any:
    """The process's IPython shell with a fresh namespace, a matplotlib Figure shown as PNG
    (registered by name: matplotlib is not imported for it), and a last expression shown as a
    rich output (not printed as text)."""
    from IPython.core.displayhook import DisplayHook
    from IPython.core.interactiveshell import InteractiveShell

    class PublishingHook(DisplayHook):
        """Publishes a cell's result (every format) like ``display()`` does."""

        def write_output_prompt(self) -> None:
            """No ``Out[n]`` prompt."""

        def write_format_data(self, format_dict: Any, md_dict: Any = None) -> None:
            """Publish the result's formats."""
            shell: Any = self.shell
            shell.display_pub.publish(format_dict, md_dict or {})

    shell = InteractiveShell.instance()
    if not isinstance(shell.displayhook, PublishingHook):
        shell.displayhook = PublishingHook(shell=shell, cache_size=0)
        shell.display_trap.hook = shell.displayhook
    shell.reset(new_session=True)
    formatter: Any = shell.display_formatter
    png = formatter.formatters["image/png"]
    png.for_type_by_name("matplotlib.figure", "Figure", figure_png)  # lays itself out
    return shell


@contextmanager
def _working_directory(path: Path) -> Iterator[None]:
    """Run the block in ``path``, then return to the current directory."""
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


@contextmanager
def _agg_backend() -> Iterator[None]:
    """matplotlib on the Agg backend (no window) in the block, restored afterwards, without
    importing it: a matplotlib not imported yet reads ``MPLBACKEND`` when a cell imports it."""
    matplotlib = sys.modules.get("matplotlib")
    before = matplotlib.get_backend() if matplotlib is not None else os.environ.get("MPLBACKEND")
    if matplotlib is not None:
        matplotlib.use("Agg")
    else:
        os.environ["MPLBACKEND"] = "Agg"
    try:
        yield
    finally:
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None:
            plt.close("all")
        if matplotlib is not None:
            matplotlib.use(before)
        elif before is None:
            os.environ.pop("MPLBACKEND", None)
        else:
            os.environ["MPLBACKEND"] = before
