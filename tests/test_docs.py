"""The README stays short and the pages under docs/ stay true to the registry (no fitting)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from algorithms.registry import REGISTRY
from benchmarks import docs_pages
from core.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_algorithm_page_tables_match_the_registry(name):
    page = docs_pages.algorithm_page(name)
    assert page.exists(), f"docs/algorithms/{name}.md is missing"
    text = page.read_text()
    for region, expected in docs_pages.registry_regions(name).items():
        assert docs_pages.read_region(text, region).strip() == expected.strip(), (
            f"{region} in {page.name} is stale: run `{docs_pages.PARAMS_COMMAND}`")


def test_the_parameter_vocabulary_page_matches_the_registry():
    text = docs_pages.PARAMETERS_PAGE.read_text()
    for region, expected in docs_pages.parameters_regions().items():
        assert docs_pages.read_region(text, region).strip() == expected.strip(), (
            f"{region} in parameters.md is stale: run `{docs_pages.PARAMS_COMMAND}`")


def test_generated_regions_are_closed_and_unique():
    for page in DOCS.rglob("*.md"):
        text = page.read_text()
        begins = re.findall(r"<!-- BEGIN GENERATED: (\S+) -->", text)
        ends = re.findall(r"<!-- END GENERATED: (\S+) -->", text)
        assert begins == ends, f"{page}: unmatched generated-region markers"
        assert len(set(begins)) == len(begins), f"{page}: a region id appears twice"


def test_every_docs_page_is_linked_from_the_index():
    index = DOCS / "index.md"
    links = {(DOCS / target).resolve() for target in
             re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", index.read_text())}
    pages = {page.resolve() for page in DOCS.rglob("*.md") if page != index}
    missing = sorted(str(page.relative_to(DOCS)) for page in pages - links)
    assert not missing, f"not linked from docs/index.md: {missing}"


def test_readme_fits_in_300_lines_and_30_kb():
    text = README.read_text()
    assert len(text.splitlines()) <= 300
    assert len(text.encode()) <= 30 * 1024


def test_readme_keeps_the_two_commands_and_links_the_docs():
    text = README.read_text()
    assert "make serve" in text and "make test" in text
    assert "docs/index.md" in text


def test_readme_documents_every_setting():
    settings = Settings
    prefix = settings.model_config.get("env_prefix", "")
    text = README.read_text()
    missing = [f"{prefix}{name}".upper() for name in settings.model_fields
               if f"`{prefix}{name}`".upper() not in text.upper()]
    assert not missing, f"README's configuration table lacks {missing}"


def test_replace_region_changes_only_the_inside_of_its_markers():
    text = ("intro\n<!-- BEGIN GENERATED: a -->\nold\n<!-- END GENERATED: a -->\n"
            "<!-- BEGIN GENERATED: b -->\nkept\n<!-- END GENERATED: b -->\noutro\n")
    new = docs_pages.replace_region(text, "a", "| new | table |")
    assert new == text.replace("old", "| new | table |")
    assert docs_pages.read_region(new, "b") == "kept\n"
    with pytest.raises(KeyError):
        docs_pages.replace_region(text, "c", "anything")


def test_demote_headings_puts_a_script_heading_under_the_page_section():
    assert docs_pages.demote_headings("## Table 1\n\n| a |\n") == "### Table 1\n\n| a |\n"


def test_relative_links_of_the_readme_and_docs_point_to_files():
    broken = []
    for page in [README, *DOCS.rglob("*.md")]:
        for target in re.findall(r"\]\(([^)#\s:]+)(?:#[^)]*)?\)", page.read_text()):
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, f"broken links: {broken}"


LAYOUT_PACKAGES = ("algorithms", "algorithms/selection", "algorithms/lowrank_sdp", "core",
                   "service", "worker", "mmc", "mmc_client")


def test_every_module_is_listed_in_the_layout_page():
    # docs/layout.md's tree names each module of the packages; the params models and the
    # routes are listed as groups (one module per algorithm, one per resource).
    tree = (ROOT / "docs" / "layout.md").read_text().split("```")[3]
    listed = set(re.findall(r"\b([A-Za-z0-9_]+\.py)\b", tree))
    missing = [f"{package}/{path.name}" for package in LAYOUT_PACKAGES
               for path in sorted((ROOT / package).glob("*.py"))
               if not path.name.startswith("__") and path.name not in listed]
    routes = re.search(r"routes/\s+one module per resource: ([^`]*?)\n\s*console/", tree)
    assert routes, "docs/layout.md lists service/routes/ as one module per resource"
    missing += [f"service/routes/{path.name}" for path in sorted(
        (ROOT / "service" / "routes").glob("*.py"))
        if not path.name.startswith("__") and path.stem not in routes.group(1)]
    assert not missing, f"modules missing from docs/layout.md: {missing}"
