"""Links that work in three places: on GitHub, in an editor and on the site.

The pages link to the files the repository holds, relative to the page (``../notebooks/02_main_results.ipynb``,
``../artifacts/cpu/figures/fig2_main_results.png``, ``../papa/cli.py``), so that GitHub and an editor follow them.
The site holds copies of those files elsewhere, and pages generated from the code in place of its source
(``docs/gen_pages.py``, at build time: `SITE_COPIES`, `SITE_PAGES`); this hook points the links of each page there
before mkdocs checks them, so that the strict build still fails on a link to nothing.
"""
from __future__ import annotations

import posixpath
import re

#: Repository folder -> the site folder `docs/gen_pages.py` copies its files into (paths from the repository root).
SITE_COPIES = {"notebooks": "notebooks", "artifacts/cpu/figures": "results/figures"}
#: Source -> the reference page generated from it: the command line, and each layer of the package (a folder of papa/).
SITE_PAGES = {"papa/cli.py": "reference/cli.md"}
_LINK = re.compile(r"(\]\()([^)\s#]+)")


def site_link(target: str, page: str) -> str:
    """`target`, a link written in the page at `page` (its path under docs/), as the site resolves it: a file of a
    folder the site copies is pointed at its copy; any other link is left as it is."""
    if "://" in target or target.startswith(("/", "#", "mailto:")):
        return target
    here = posixpath.dirname(page)
    in_repo = posixpath.normpath(posixpath.join("docs", here, target))
    for folder, copy in SITE_COPIES.items():
        if in_repo.startswith(folder + "/"):
            return posixpath.relpath(copy + in_repo[len(folder):], here or ".")
    page_for = SITE_PAGES.get(in_repo)
    if page_for is None and in_repo.startswith("papa/") and in_repo.count("/") == 1 and "." not in in_repo:
        page_for = f"reference/{in_repo.removeprefix('papa/')}.md"  # a layer: its API reference
    return target if page_for is None else posixpath.relpath(page_for, here or ".")


def on_page_markdown(markdown: str, page, config, files) -> str:  # mkdocs hook
    page_path = page.file.src_uri
    return _LINK.sub(lambda m: m.group(1) + site_link(m.group(2), page_path), markdown)
