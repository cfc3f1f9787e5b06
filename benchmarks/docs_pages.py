"""Generated regions of the pages under ``docs/``: the one place measured numbers live.

A page marks each generated region with two HTML comments::

    <!-- BEGIN GENERATED: itersvr-paper -->
    ...
    <!-- END GENERATED: itersvr-paper -->

and only the program named in the region's first line writes between them. Two kinds of region:

* measured tables: a benchmark run with ``--write-docs`` captures the Markdown it prints and writes
  it, under a line with the command, the date and the machine (``record``);
* registry tables: ``python -m benchmarks.docs_pages --params`` writes each algorithm's parameter
  table and its limits from ``algorithms.registry``, and the vocabulary of parameter names
  (``docs/parameters.md``) (no fitting, deterministic, so
  ``tests/test_docs.py`` can regenerate them in memory and fail when a page is stale).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import os
import platform
import re
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import annotated_types
from pydantic.fields import FieldInfo

DOCS = Path(__file__).resolve().parent.parent / "docs"
ALGORITHMS = DOCS / "algorithms"
PARAMS_COMMAND = "python -m benchmarks.docs_pages --params"


def begin_marker(region: str) -> str:
    return f"<!-- BEGIN GENERATED: {region} -->"


def end_marker(region: str) -> str:
    return f"<!-- END GENERATED: {region} -->"


def _region_pattern(region: str) -> re.Pattern[str]:
    return re.compile(re.escape(begin_marker(region)) + r"\n(.*?)" + re.escape(end_marker(region)),
                      re.DOTALL)


def read_region(text: str, region: str) -> str:
    """The text between the markers of ``region`` (a ``KeyError`` when the page has none)."""
    match = _region_pattern(region).search(text)
    if match is None:
        raise KeyError(f"no region {region!r} (markers {begin_marker(region)} ... "
                       f"{end_marker(region)})")
    return match.group(1)


def replace_region(text: str, region: str, body: str) -> str:
    """``text`` with the inside of ``region`` replaced by ``body``."""
    read_region(text, region)
    inside = body.strip("\n") + "\n"
    return _region_pattern(region).sub(
        lambda _: f"{begin_marker(region)}\n{inside}{end_marker(region)}", text, count=1)


def write_region(page: Path, region: str, body: str) -> None:
    page.write_text(replace_region(page.read_text(), region, body))
    print(f"wrote {region} in {page.relative_to(DOCS.parent)}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# Measured tables: what a benchmark prints, with the command, date and machine
# ---------------------------------------------------------------------------------------------


def machine() -> str:
    """The CPU model and count, and the Python, numpy and scikit-learn versions."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    import numpy
    import sklearn

    return (f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}, numpy "
            f"{numpy.__version__}, scikit-learn {sklearn.__version__}")


def provenance(command: str) -> str:
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    # A shared machine's contention shows in the seconds, so the page says how loaded it was.
    load = os.getloadavg()[0]
    return (f"_Made by `{command}` on {today}, {machine()}; 1-minute load average {load:.1f} at "
            f"the end of the run._")


def pending(command: str) -> str:
    """The inside of a region that no run has filled yet."""
    return f"_Not generated yet: `{command}` fills this table._"


def demote_headings(markdown: str, levels: int = 1) -> str:
    """Move Markdown headings down ``levels`` levels, so a script's ``##`` sits under a page's
    ``##`` section."""
    return re.sub(r"^(#+) ", lambda m: "#" * min(6, len(m.group(1)) + levels) + " ", markdown,
                  flags=re.MULTILINE)


def add_write_docs_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--write-docs", action="store_true",
                        help="also write the printed tables into their docs/ page "
                             "(benchmarks/docs_pages.py)")


def command_line(module: str) -> str:
    """The command as it was run, for the provenance line (``--write-docs`` left out)."""
    args = [arg for arg in sys.argv[1:] if arg != "--write-docs"]
    return " ".join(["python -m", module, *args])


class _Tee(io.TextIOBase):
    def __init__(self, stream: typing.TextIO) -> None:
        self.stream = stream
        self.buffer_ = io.StringIO()

    def write(self, text: str) -> int:
        self.buffer_.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()


@contextlib.contextmanager
def captured() -> Iterator[io.StringIO]:
    """Print as usual and also keep a copy of everything printed to stdout."""
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        yield tee.buffer_


@contextlib.contextmanager
def record(write: bool, page: Path, region: str, module: str) -> Iterator[None]:
    """Run the block; with ``write``, put what it printed into ``region`` of ``page`` under the
    provenance line. Nothing is written when the block raises."""
    if not write:
        yield
        return
    with captured() as output:
        yield
    body = provenance(command_line(module)) + "\n\n" + demote_headings(output.getvalue().strip())
    write_region(page, region, body)


def algorithm_page(name: str) -> Path:
    return ALGORITHMS / f"{name}.md"


# ---------------------------------------------------------------------------------------------
# Registry tables: parameters and limits
# ---------------------------------------------------------------------------------------------


def _number(value: Any) -> str:
    """``1e12`` rather than ``1000000000000.0``, ``10000`` rather than ``10000.0``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return repr(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e6:
        return str(int(value))
    if isinstance(value, int) and (abs(value) < 1e6 or value % 10**6):
        return str(value)
    return f"{value:g}".replace("e+0", "e").replace("e+", "e").replace("e-0", "e-")


def _constraints(metadata: list[Any]) -> list[str]:
    lower = upper = ""
    for item in metadata:
        if isinstance(item, annotated_types.Ge):
            lower = f"{_number(item.ge)} <= "
        elif isinstance(item, annotated_types.Gt):
            lower = f"{_number(item.gt)} < "
        elif isinstance(item, annotated_types.Le):
            upper = f" <= {_number(item.le)}"
        elif isinstance(item, annotated_types.Lt):
            upper = f" < {_number(item.lt)}"
    return [f"{lower}x{upper}"] if lower or upper else []


def _kinds(annotation: Any, metadata: list[Any]) -> list[str]:
    """Readable bounds of a type: ranges of numbers, the choices of a Literal, None."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *extra = typing.get_args(annotation)
        nested = [m for item in extra for m in
                  (item.metadata if isinstance(item, FieldInfo) else [item])]
        return _kinds(inner, [*metadata, *nested])
    if origin in (typing.Union, types.UnionType):
        return [kind for arg in typing.get_args(annotation) for kind in _kinds(arg, metadata)]
    if origin is typing.Literal:
        return [", ".join(f"`{choice!r}`" for choice in typing.get_args(annotation))]
    if annotation is type(None):
        return ["`None`"]
    name = getattr(annotation, "__name__", str(annotation))
    ranges = _constraints(metadata)
    return [f"{name}, `{ranges[0]}`" if ranges else name]


def field_bounds(field: FieldInfo) -> str:
    return "; or ".join(_kinds(field.annotation, list(field.metadata)))


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def params_table(name: str) -> str:
    """Markdown table of the parameters of ``name``: name, default, bounds, description."""
    from algorithms.registry import REGISTRY

    fields = REGISTRY[name].params_model.model_fields
    lines = ["| parameter | default | accepted values | meaning |", "|---|---|---|---|"]
    for field_name, field in fields.items():
        default, bounds = _number(field.default), _cell(field_bounds(field))
        meaning = _cell(field.description or "")
        lines.append(f"| `{field_name}` | `{default}` | {bounds} | {meaning} |")
    return "\n".join(lines)


def limits_table(name: str) -> str:
    """Markdown table of what the registry says of ``name`` besides its parameters."""
    from algorithms.registry import REGISTRY

    spec = REGISTRY[name]
    described = spec.describe()
    rows = [
        ("estimator class", f"`{spec.estimator.__name__}`"),
        ("input", "integer sequences" if spec.input_kind == "sequences" else "a matrix of "
         "vectors" + (" (dense or sparse CSR)" if spec.accepts_sparse else "")),
        ("labels `y`", {"none": "not taken", "optional": "optional (partial labels, -1 = "
                        "unknown)", "required": "required"}[spec.labels]),
        ("queue (default parameters)", f"`{described['queue']}`"),
        ("max_n (default parameters)", f"{described['max_n']:,}"),
        ("how queue and max_n follow the parameters", described["limits_rule"]),
        ("job timeout", f"{spec.timeout_seconds:,} s (capped by `MMC_JOB_TIMEOUT_CAP_SECONDS`)"),
        ("re-queued when its worker is lost", "yes" if spec.retry_safe else "no"),
        *((f"note: {key}", value) for key, value in spec.notes.items()),
    ]
    lines = ["| | |", "|---|---|", *(f"| {key} | {_cell(value)} |" for key, value in rows)]
    return "\n".join(lines)


def registry_regions(name: str) -> dict[str, str]:
    """The registry regions of ``name``'s page and their content."""
    line = f"_Generated from the registry by `{PARAMS_COMMAND}`._"
    return {f"{name}-params": f"{line}\n\n{params_table(name)}",
            f"{name}-limits": f"{line}\n\n{limits_table(name)}"}


PARAMETERS_PAGE = DOCS / "parameters.md"


def vocabulary_table() -> str:
    """Markdown table of every public parameter name: its one meaning, the algorithms that have
    it, what their descriptions may say differently and why the name was chosen
    (:data:`algorithms.params.vocabulary.TERMS`)."""
    from algorithms.params.vocabulary import TERMS
    from algorithms.registry import REGISTRY

    lines = ["| name | meaning | algorithms | differs between algorithms | why this name |",
             "|---|---|---|---|---|"]
    for name in sorted(TERMS, key=str.lower):
        term = TERMS[name]
        owners = ", ".join(f"`{a}`" for a in sorted(REGISTRY)
                           if name in REGISTRY[a].params_model.model_fields)
        lines.append(f"| `{name}` | {_cell(term.meaning)} | {owners} | "
                     f"{_cell(term.varies) or '-'} | {_cell(term.why)} |")
    return "\n".join(lines)


def renames_table() -> str:
    """Markdown table of the old spellings still accepted, with a warning, for one release."""
    from algorithms.params.vocabulary import renames
    from algorithms.registry import REGISTRY

    rows: dict[tuple[str, str], list[str]] = {}
    for old, new, algorithm in renames({a: s.params_model for a, s in REGISTRY.items()}):
        rows.setdefault((old, new), []).append(algorithm)
    lines = ["| old spelling | new spelling | algorithms |", "|---|---|---|"]
    lines += [f"| `{old}` | `{new}` | {', '.join(f'`{a}`' for a in algorithms)} |"
              for (old, new), algorithms in sorted(rows.items(), key=lambda row: row[0][0].lower())]
    return "\n".join(lines)


def parameters_regions() -> dict[str, str]:
    """The registry regions of ``docs/parameters.md`` and their content."""
    line = f"_Generated from the registry by `{PARAMS_COMMAND}`._"
    return {"parameters-vocabulary": f"{line}\n\n{vocabulary_table()}",
            "parameters-renamed": f"{line}\n\n{renames_table()}"}


def write_registry_tables() -> None:
    from algorithms.registry import algorithm_names

    text = PARAMETERS_PAGE.read_text()
    for region, body in parameters_regions().items():
        text = replace_region(text, region, body)
    PARAMETERS_PAGE.write_text(text)
    print(f"wrote the vocabulary and the renames in {PARAMETERS_PAGE.relative_to(DOCS.parent)}",
          file=sys.stderr)
    for name in algorithm_names():
        page = algorithm_page(name)
        text = page.read_text()
        for region, body in registry_regions(name).items():
            text = replace_region(text, region, body)
        page.write_text(text)
        print(f"wrote {name}-params and {name}-limits in {page.relative_to(DOCS.parent)}",
              file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--params", action="store_true",
                        help="write every algorithm page's parameter and limits tables and "
                             "docs/parameters.md")
    args = parser.parse_args()
    if not args.params:
        parser.error("nothing to do: give --params")
    write_registry_tables()


if __name__ == "__main__":
    main()
