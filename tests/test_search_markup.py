"""Markdown and reStructuredText sources reach the corpus as their prose (search/markup.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deepresearch.errors import InputError
from deepresearch.search import ingest, readers
from deepresearch.search.markup import plain_inline, plain_text
from deepresearch.search.readers import read_file

RST = """.. _`pip install`:

===========
pip install
===========

:orphan:

.. Licensed under the MIT license;
   see LICENSE.txt for the terms.

.. meta::

  :http-equiv=refresh: 3; url=../getting-started/

Overview
--------

Note that ``pip install`` prefers to leave the installed version as-is unless ``--upgrade``
is specified, as :pep:`440` and the :ref:`requirement specifiers <Requirement Specifiers>` say.
See `the packaging guide <https://packaging.python.org/>`_ and :doc:`user_guide`, or read
:doc:`Dependency resolution
backtracking <topics/dependency-resolution>` first.

#. Regenerate the script.
#. Commit the results.

.. note::
   :class: tip

   A **wheel** is built *once* and installed many times.

.. code-block:: python

   pip.main(["install", "x"])
"""

MD = """(getting-started)=
# Getting Started

To get started, [install Python](https://python.org) and read the {doc}`installation <install>` page.
![a diagram](img/flow.png) shows the **three** steps.

```{pip-cli}
$ pip install **not-emphasis**
```

[PyPI]: https://pypi.org/

---

By default, pip fetches packages from [the index][PyPI]; `*.whl` files and a * b stay as written.
"""


def test_rst_markup_gives_way_to_its_text():
    text = plain_text(RST, "rst")
    assert "Note that `pip install` prefers to leave the installed version as-is unless `--upgrade`" in text
    assert "as PEP 440 and the requirement specifiers say." in text
    assert "See the packaging guide and user_guide, or read\nDependency resolution\nbacktracking first." in text
    assert "\nRegenerate the script.\nCommit the results." in text
    assert "A wheel is built once and installed many times." in text  # a note's body stays
    assert 'pip.main(["install", "x"])' in text  # a code block's code stays
    for gone in (
        "..",
        "===",
        "---",
        ":orphan:",
        "LICENSE",
        "http-equiv",
        ":class:",
        "code-block",
        "``",
        ":ref:",
        "<http",
    ):
        assert gone not in text, gone


def test_markdown_markup_gives_way_to_its_text():
    text = plain_text(MD, "md")
    assert "To get started, install Python and read the installation page." in text
    assert "a diagram shows the three steps." in text
    assert "$ pip install **not-emphasis**" in text  # code in a fence is kept as written
    assert "By default, pip fetches packages from the index; `*.whl` files and a * b stay as written." in text
    for gone in ("```", "https://pypi.org", "(getting-started)=", "{doc}", "](", "\n---\n"):
        assert gone not in text, gone


@pytest.mark.parametrize(
    ("line", "plain"),
    [
        (":class:`~pkg.mod.Name` is public", "pkg.mod.Name is public"),
        ("see `Wheel`_ and `sdist`__", "see Wheel and sdist"),
        ("**kwargs and *args are passed on", "**kwargs and *args are passed on"),
        ("snake_case_name stays", "snake_case_name stays"),
        ("define __init__ and __repr__", "define __init__ and __repr__"),
        ("as {pep}`517` says[^1] and [#]_ notes", "as PEP 517 says and  notes"),
        ("a {term}`pypug:Requirement Specifier` here", "a Requirement Specifier here"),
    ],
)
def test_inline_markup_cases(line, plain):
    assert plain_inline(line) == plain


def test_files_are_read_by_their_markup(tmp_path: Path):
    (tmp_path / "install.rst").write_text(RST, encoding="utf-8")
    (tmp_path / "start.md").write_text(MD, encoding="utf-8")
    (tmp_path / "notes.txt").write_text("Plain *text* keeps its ``marks``.\n", encoding="utf-8")
    rst = read_file(tmp_path / "install.rst")
    assert rst.title == "pip install" and "``" not in rst.text and ".. _" not in rst.text
    md = read_file(tmp_path / "start.md")
    assert md.title == "Getting Started" and "{doc}" not in md.text
    assert read_file(tmp_path / "notes.txt").text == "Plain *text* keeps its ``marks``.\n"  # .txt: as written


def test_a_file_of_markup_only_is_a_clear_error(tmp_path: Path):
    only = tmp_path / "vendoring.rst"
    only.write_text(".. include:: ../../README.rst\n", encoding="utf-8")
    with pytest.raises(InputError, match="only markup"):
        read_file(only)


def test_a_streamed_rst_file_reads_as_the_whole_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Above STREAM_BYTES the file is cleaned piece by piece, cut at line ends: same title and text."""
    big = tmp_path / "big.rst"
    big.write_text(RST + "\n".join(f"Section {i}\n{'-' * 12}\n\nSee :ref:`part {i} <p{i}>` now.\n" for i in range(300)))
    whole = read_file(big)
    monkeypatch.setattr(readers, "PIECE_BYTES", 512)
    title, pieces = readers.stream_text_file(big)
    streamed: Any = "".join(pieces)
    assert title == whole.title == "pip install"
    assert streamed == whole.text and "See part 299 now." in streamed
    assert ingest.STREAM_BYTES > len(big.read_bytes())  # read_file took the whole-file path above


def test_corpus_add_stores_an_rst_page_by_its_title_and_prose(tmp_path: Path):
    """The real ingest path: the page's section title is the document's title, its prose is what the keyword
    index holds, and a page of markup only is one clear error, not a failed batch."""
    from deepresearch.config import CorpusConfig
    from deepresearch.db import connect
    from deepresearch.search.corpus import Corpus
    from tests.fakes import FakeEmbedder

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "install.rst").write_text(RST, encoding="utf-8")
    (docs / "vendoring.rst").write_text(".. include:: ../README.rst\n", encoding="utf-8")
    corpus = Corpus(connect(tmp_path / "c.db"), FakeEmbedder(), CorpusConfig())
    report = corpus.add_paths([docs])
    assert report.added == [str(docs / "install.rst")]
    assert len(report.errors) == 1 and "only markup" in report.errors[0]
    title, text = corpus.conn.execute(
        "select d.title, c.text from corpus_documents d join corpus_chunks c on c.doc_id = d.id"
    ).fetchone()
    assert title == "pip install" and "as PEP 440 and the requirement specifiers say" in " ".join(text.split())
    hits = corpus.conn.execute("select count(*) from corpus_fts where corpus_fts match 'specifiers'").fetchone()[0]
    assert (
        hits == 1
        and corpus.conn.execute("select count(*) from corpus_fts where corpus_fts match 'orphan'").fetchone()[0] == 0
    )
    corpus.conn.close()
