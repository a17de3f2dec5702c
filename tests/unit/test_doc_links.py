"""Every relative link of the README and the docs pages leads to a file of the repository, as GitHub and an editor
follow it, and to a page or file of the site, as docs/hooks.py points it there (the strict build,
tests/acceptance/test_docs_site.py, checks the site's side in full)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from docs import hooks

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _relative_links(page: Path) -> list[str]:
    links = [m.group(1).split("#", 1)[0] for m in _LINK.finditer(page.read_text(encoding="utf-8"))]
    return [link for link in links if link and "://" not in link and not link.startswith(("/", "mailto:"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_leads_to_a_file_of_the_repository(page):
    missing = [link for link in _relative_links(page) if not (page.parent / link).exists()]
    assert not missing, f"{page.relative_to(REPO)} links to what the repository does not hold: {missing}"


def test_the_site_finds_each_docs_link_where_the_build_copies_it():
    copied = {copy: REPO / folder for folder, copy in hooks.SITE_COPIES.items()}
    generated = {*hooks.SITE_PAGES.values(),  # docs/gen_pages.py writes these from the code
                 *(f"reference/{p.name}.md" for p in (REPO / "papa").iterdir() if (p / "__init__.py").is_file())}
    for page in PAGES[1:]:
        for link in _relative_links(page):
            on_site = hooks.site_link(link, page.name)
            folder, _, name = on_site.rpartition("/")
            assert ((REPO / "docs" / on_site).exists() or on_site in generated
                    or (folder in copied and (copied[folder] / name).is_file())), \
                (page.name, link, on_site)


def test_a_link_outside_the_copied_folders_is_left_as_written():
    assert hooks.site_link("../notebooks/02_main_results.ipynb", "results.md") == "notebooks/02_main_results.ipynb"
    assert hooks.site_link("../../artifacts/cpu/figures/fig2.png", "sub/page.md") == "../results/figures/fig2.png"
    assert hooks.site_link("../papa/cli.py", "index.md") == "reference/cli.md"
    assert hooks.site_link("../papa/method/", "index.md") == "reference/method.md"
    assert hooks.site_link("measurements.md", "results.md") == "measurements.md"
    assert hooks.site_link("../benchmarks/bench.py", "results.md") == "../benchmarks/bench.py"
