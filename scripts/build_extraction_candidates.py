"""Build the sources and the candidate facts of the extraction labeled set (tests/data/).

    python3 scripts/build_extraction_candidates.py \
        --scifact ../shared/eval/beir/scifact/corpus.jsonl \
        --hotpotqa ../shared/eval/multihop/hotpotqa_train.json \
        --sqlite-doc /tmp/facts-doc/usr/share/doc/sqlite3

Three corpora of different kinds, each split into a dev part (looked at while designing the
rules), a held-out part (labeled before any tuning), a fresh part (labeled blind in session 12)
a blind2 part (labeled and committed in session 13 before that session's rules ran on it) and a
dev2 part (session 13's extra tuning data, labeled after blind2 was committed), and a blind3 part
(labeled and committed before the rules written from blind2's failures ran on it), a blind4
part (the same, before the rules written from blind3's failures ran on it) and a blind5 part
(session 14: labeled and committed before any of that session's code ran on it; its paragraphs
come from MuSiQue, `--musique`, instead of HotpotQA) and a blind6 part (session 15: the same, with the
Node.js API documentation, `--node-doc`, for its documentation set) and a blind7 part (session 16: the same,
with HotpotQA paragraphs and the Rust book, `--rust-book`, for its documentation set) and a blind8 part (session 17:
the same, larger — SciFact, HotpotQA and MuSiQue paragraphs, and the Cargo book, `--cargo-book`, for its documentation
set) and a blind9 part (session 17, second round: the same, with the rustc book, `--rustc-book`) and a blind10 part
(session 18: the same, with the Rust Reference, `--reference`) and a blind11 part (session 19: the same, with the
Rustonomicon, `--nomicon`) and a blind12 part (session 20: the same, with the Valgrind user manual, `--valgrind`) and a
blind13 part (session 21: the same, with the libffi manual, `--libffi`) and a blind14 part (session 23: the same, with
the libxslt documentation, `--libxslt`) and a blind15 part (session 31: the same, with the Ninja build system's manual,
`--ninja`) and a blind16 part (session 36: the same, with Python 3.11's documentation, `--python-doc`) and a blind17
part (session 36, second round: the same, with the Debian Reference, `--debian-reference`) and a blind18 part (its
third round: SciFact and MuSiQue only, as HotpotQA's 100 questions are all taken, and chunks of Bash's manual page,
`--bash-doc`) and a blind19 part (its fourth round: the same kinds, with zsh's manual, `--zsh-doc`) and a blind20
part (labeled at its end for the next session's read: the same kinds, with Postfix's documentation, `--postfix-doc`)
and a blind21 part (session 37: the same kinds, with Graphviz's documentation, `--graphviz-doc`) and a blind22 part
(its second round: the same kinds, with gnuplot's manual, `--gnuplot-doc`) and a blind23 part (session 38: SciFact,
HotpotQA's distractor paragraphs — those of a question that support no answer, never taken as sources before — and BIND
9's Administrator Reference Manual, `--bind9-doc`) and a blind24 part (its second round: SciFact, MuSiQue's last two
questions' supporting paragraphs and distractor paragraphs, and chunks of "An Introduction to R", `--r-intro`) and a
blind25 part (its third round: SciFact, HotpotQA's distractor paragraphs, GNU gettext's manual, `--gettext-doc`) and a
blind26 part (the same with MuSiQue's distractor paragraphs and chunks of HAProxy's starter guide, `--haproxy-intro`):
- SciFact abstracts, cut into corpus chunks (`chunk_text`, the corpus defaults 180/30 words);
- HotpotQA supporting paragraphs (whole paragraphs, as a Wikipedia search returns them);
- SQLite documentation pages (Debian's sqlite3-doc), read and chunked by the corpus code, so
  chunks start and end mid-sentence exactly as research sees them.

Writes tests/data/extraction_sources.jsonl (one source a line: id, corpus, split, title,
topic, url, text) and adds to tests/data/extraction_labels.jsonl every sentence-level
candidate of each source not labeled yet (labels null): each block sentence as today's
extractive cleaner returns it (or as written when it rejects it), plus the facts that
`--extractors` (baseline and new extraction) store — so both are judged on the same labels.
Existing labels are kept.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from deepresearch.facts import normalize_text  # noqa: E402
from deepresearch.grounding import block_sentences  # noqa: E402
from deepresearch.search.ingest import chunk_text  # noqa: E402
from deepresearch.search.readers import read_html_file  # noqa: E402
from deepresearch.text import normalize_space  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
SOURCES = DATA / "extraction_sources.jsonl"
LABELS = DATA / "extraction_labels.jsonl"

# SQLite pages: dev holds the pages the examples come from; held-out pages are others.
SQLITE_PAGES = {
    "dev": ["wal.html", "pragma.html", "flextypegood.html", "isolation.html"],
    "heldout": ["atomiccommit.html", "datatype3.html", "whentouse.html", "quirks.html"],
    # session 12: labeled before the session's rules ran on it (one chunk, half-way in, per page)
    "fresh": ["lockingv3.html", "howtocorrupt.html", "tempfiles.html", "foreignkeys.html"],
    # session 13: labeled (and committed) before that session's rules ran on it
    "blind2": ["queryplanner.html", "sharedcache.html", "limits.html", "autoinc.html", "inmemorydb.html"],
    # session 13: more tuning data (rules and category examples), labeled after blind2 was committed
    "dev2": ["faq.html", "stricttables.html", "testing.html", "lang_vacuum.html", "json1.html"],
    # session 13, second round: labeled and committed before the rules written from blind2's failures ran on it
    "blind3": ["lang_createtable.html", "optoverview.html", "fts5.html", "rtree.html", "cli.html"],
    # session 13, third round: labeled and committed before the rules written from blind3's failures ran on it
    "blind4": ["gencol.html", "partialindex.html", "windowfunctions.html", "whynotgit.html", "mmap.html"],
    # session 14: labeled and committed before any new code ran on it (the blind measure of main)
    "blind5": ["lang_upsert.html", "withoutrowid.html", "serverless.html", "floatingpoint.html", "lang_datefunc.html"],
}
# Chunks of pragma.html: the synchronous section the issue quotes (the page has ~200 chunks).
PRAGMA_MARK = "PRAGMA schema.synchronous"
HOTPOT_QUESTIONS = {
    "dev": range(20, 25),
    "heldout": range(60, 65),
    "fresh": range(90, 93),
    "blind2": range(40, 44),
    "dev2": range(30, 34),
    "blind3": range(50, 54),
    "blind4": range(70, 74),
    "blind7": range(80, 86),
    "blind8": range(93, 99),
    "blind9": range(25, 30),
    "blind10": range(34, 40),
    "blind11": range(44, 50),
    "blind12": range(54, 60),
    # blind13: nine questions, as the libffi manual's short pages give fewer candidates than the older sets' chunks
    "blind13": (*range(65, 70), *range(74, 78)),
    # blind14: the seven questions no split had used (the file has 100)
    "blind14": (78, 79, 86, 87, 88, 89, 99),
    # blind15: seven of the first twenty questions, which no split had used (20–99 are all taken)
    "blind15": range(0, 7),
    # blind16: the first twenty questions' seven after blind15's, which no split had used
    "blind16": range(7, 14),
    # blind17: the last six of the first twenty questions, which no split had used (0–99 are all taken now)
    "blind17": range(14, 20),
}
SCIFACT_DOCS = {
    "dev": 3, "heldout": 3, "fresh": 2, "blind2": 2, "dev2": 2, "blind3": 2, "blind4": 2, "blind5": 2, "blind6": 2,
    "blind7": 2, "blind8": 3, "blind9": 2, "blind10": 3, "blind11": 3,
    "blind12": 3, "blind13": 3, "blind14": 3, "blind15": 3, "blind16": 3, "blind17": 3, "blind18": 3, "blind19": 3,
    "blind20": 3, "blind21": 3, "blind22": 3, "blind23": 3, "blind24": 3, "blind25": 3, "blind26": 3,
}  # fmt: skip
# session 14's blind5 takes MuSiQue's supporting paragraphs (Wikipedia, another question set) instead of HotpotQA's.
MUSIQUE_QUESTIONS = {
    "blind5": range(10, 14), "blind6": range(14, 18), "blind8": range(18, 22), "blind9": range(22, 26),
    "blind10": range(26, 30), "blind11": range(30, 34), "blind12": range(34, 38), "blind13": range(38, 42),
    "blind14": range(42, 46), "blind15": range(46, 50), "blind16": range(50, 54), "blind17": range(54, 58),
    "blind18": range(58, 66),  # eight: no HotpotQA paragraphs in blind18
    "blind19": range(66, 74),
    "blind20": range(74, 82),
    "blind21": range(82, 90),
    "blind22": range(90, 98),
    "blind24": range(98, 100),  # the last two
}  # fmt: skip
# Session 38: every question's supporting paragraphs are taken (HotpotQA's 100, MuSiQue's 10–99), so fresh Wikipedia
# text comes from the distractor paragraphs, which support no answer and were never sources: the first two in the
# question's order whose article no earlier source took.
HOTPOT_DISTRACTORS = {"blind23": range(0, 8), "blind25": range(8, 16)}
MUSIQUE_DISTRACTORS = {"blind24": range(10, 16), "blind26": range(16, 24)}
# session 15's blind6 takes its documentation from another set than SQLite's: Node.js's API pages (Debian's
# nodejs-doc, `--node-doc`), one chunk a third of the way into each page.
NODE_PAGES = {
    "blind6": ["worker_threads.html", "packages.html", "permissions.html", "esm.html", "timers.html", "stream.html"]
}
# Where each split's SciFact abstracts start, as a share of the file.
SCIFACT_START = {
    "dev": 0.0,
    "heldout": 0.5,
    "fresh": 0.75,
    "blind2": 0.25,
    "dev2": 0.125,
    "blind3": 0.375,
    "blind4": 0.625,
    "blind5": 0.875,
    "blind6": 0.9375,
    "blind7": 0.8125,
    "blind8": 0.4375,
    "blind9": 0.5625,
    "blind10": 0.6875,
    "blind11": 0.3125,
    "blind12": 0.1875,
    "blind13": 0.0625,
    # blind14: every sixteenth is taken, so half-way between dev's start (0) and blind13's (1/16)
    "blind14": 0.03125,
    # blind15: half-way between blind13's start (1/16) and dev2's (1/8)
    "blind15": 0.09375,
    # blind16: half-way between dev2's start (1/8) and blind12's (3/16)
    "blind16": 0.15625,
    # blind17: half-way between blind12's start (3/16) and blind2's (1/4)
    "blind17": 0.21875,
    # blind18: half-way between blind2's start (1/4) and blind11's (5/16)
    "blind18": 0.28125,
    # blind19: half-way between blind11's start (5/16) and blind3's (3/8)
    "blind19": 0.34375,
    # blind20: half-way between blind3's start (3/8) and blind8's (7/16)
    "blind20": 0.40625,
    # blind21: half-way between blind8's start (7/16) and blind6's (1/2)
    "blind21": 0.46875,
    # blind22: half-way between blind9's start (9/16) and blind4's (5/8)
    "blind22": 0.59375,
    # blind23: half-way between blind4's start (5/8) and blind10's (11/16)
    "blind23": 0.65625,
    # blind24: half-way between blind10's start (11/16) and fresh's (3/4)
    "blind24": 0.71875,
    # blind25: half-way between fresh's start (3/4) and blind7's (13/16)
    "blind25": 0.78125,
    # blind26: half-way between blind7's start (13/16) and blind5's (7/8)
    "blind26": 0.84375,
}
# session 16's blind7 takes its documentation from a third set: the Rust book (mdBook HTML, as rustup installs it,
# `--rust-book`), one chunk a third of the way into each chapter.
RUST_PAGES = {
    "blind7": [
        "ch03-02-data-types.html",
        "ch08-02-strings.html",
        "ch09-02-recoverable-errors-with-result.html",
        "ch10-03-lifetime-syntax.html",
        "ch11-02-running-tests.html",
        "ch13-02-iterators.html",
        "ch15-04-rc.html",
        "ch16-02-message-passing.html",
        "ch20-01-unsafe-rust.html",
    ]
}
# session 17's blind8 takes its documentation from a fourth set: the Cargo book (mdBook HTML, installed by rustup
# next to the Rust book, `--cargo-book`), one chunk a third of the way into each page.
CARGO_PAGES = {
    "blind8": [
        "guide/build-performance.html",
        "guide/cargo-home.html",
        "guide/cargo-toml-vs-cargo-lock.html",
        "guide/continuous-integration.html",
        "reference/build-cache.html",
        "reference/build-scripts.html",
        "reference/cargo-targets.html",
        "reference/features.html",
        "reference/profiles.html",
        "reference/publishing.html",
        "reference/resolver.html",
        "reference/semver.html",
        "reference/specifying-dependencies.html",
        "reference/workspaces.html",
    ]
}
# session 17's second round, blind9, takes its documentation from a fifth set: the rustc book (mdBook HTML, installed
# by rustup next to the Rust and Cargo books, `--rustc-book`), one chunk a third of the way into each page.
RUSTC_PAGES = {
    "blind9": [
        "what-is-rustc.html",
        "exploit-mitigations.html",
        "instrument-coverage.html",
        "jobserver.html",
        "linker-plugin-lto.html",
        "profile-guided-optimization.html",
        "target-tier-policy.html",
        "lints/levels.html",
        "symbol-mangling/index.html",
        "tests/index.html",
    ]
}
# session 18's blind10 takes its documentation from a sixth set: the Rust Reference (mdBook HTML, installed by rustup
# next to the other books, `--reference`), one chunk a third of the way into each page.
REFERENCE_PAGES = {
    "blind10": [
        "destructors.html",
        "type-coercions.html",
        "type-layout.html",
        "interior-mutability.html",
        "lifetime-elision.html",
        "visibility-and-privacy.html",
        "conditional-compilation.html",
        "linkage.html",
        "panic.html",
        "const_eval.html",
        "items/traits.html",
        "items/static-items.html",
        "types/closure.html",
        "expressions/loop-expr.html",
    ]
}
# session 19's blind11 takes its documentation from a seventh set: the Rustonomicon (mdBook HTML, installed by rustup
# next to the other books, `--nomicon`), one chunk a third of the way into each page.
NOMICON_PAGES = {
    "blind11": [
        "repr-rust.html",
        "other-reprs.html",
        "exotic-sizes.html",
        "subtyping.html",
        "dropck.html",
        "phantom-data.html",
        "send-and-sync.html",
        "atomics.html",
        "races.html",
        "transmutes.html",
        "drop-flags.html",
        "leaking.html",
        "unwinding.html",
        "exception-safety.html",
    ]
}
# session 20's blind12 takes its documentation from an eighth set, of another kind than the Rust, Node.js and SQLite
# ones: the Valgrind user manual (a C tool's manual: Debian's HTML in /usr/share/doc/valgrind/html, `--valgrind`), one
# chunk a third of the way into each of its tools' and core chapters (not the index, licence, FAQ or dist pages).
VALGRIND_PAGES = {
    "blind12": [
        "manual-intro.html",
        "quick-start.html",
        "manual-core.html",
        "manual-core-adv.html",
        "manual-writing-tools.html",
        "mc-manual.html",
        "cg-manual.html",
        "cl-manual.html",
        "hg-manual.html",
        "drd-manual.html",
        "ms-manual.html",
        "dh-manual.html",
        "lk-manual.html",
        "bbv-manual.html",
    ]
}
# session 21's blind13 takes its documentation from a ninth set, of another kind than the Rust, Node.js, SQLite and
# Valgrind ones: the libffi manual (a C library's API manual, Texinfo HTML: Debian's in /usr/share/doc/libffi8/html,
# `--libffi`), one chunk a third of the way into each of its prose pages (not the top page with the licence, the index,
# the two menu-only pages nor the four example pages, which are a line of prose before a C listing).
LIBFFI_PAGES = {
    "blind13": [
        "Introduction.html",
        "The-Basics.html",
        "Primitive-Types.html",
        "Structures.html",
        "Size-and-Alignment.html",
        "Arrays-Unions-Enums.html",
        "Complex.html",
        "Multiple-ABIs.html",
        "The-Closure-API.html",
        "Thread-Safety.html",
        "Memory-Usage.html",
        "Missing-Features.html",
    ]
}
# session 23's blind14 takes its documentation from a tenth set, of another kind than the Rust, Node.js, SQLite,
# Valgrind and libffi ones: the libxslt project's pages (an XSLT library's site and tutorials, hand-written HTML:
# Debian's libxslt1-dev in /usr/share/doc/libxslt1-dev/html, `--libxslt`), one chunk a third of the way into each of its
# prose pages (not the API*.html symbol indexes, the gtk-doc reference under html/, news.html (a changelog), xslt.html
# (the whole site on one page), docs.html and downloads.html (links), nor the EXSLT/ folder: libexslt's site, copies of
# these pages and a one-page version). API.html is taken: it is prose (the steps of a transformation), not an index.
LIBXSLT_PAGES = {
    "blind14": [
        "index.html",
        "intro.html",
        "FAQ.html",
        "API.html",
        "xsltproc2.html",
        "xsltproc.html",
        "internals.html",
        "extensions.html",
        "python.html",
        "docbook.html",
        "bugs.html",
        "help.html",
        "contribs.html",
        "tutorial/libxslttutorial.html",
        "tutorial2/libxslt_pipes.html",
    ]
}
# session 31's blind15 takes its documentation from an eleventh set, of another kind than the Rust, Node.js, SQLite,
# Valgrind, libffi and libxslt ones: the Ninja build system's manual (a build tool's manual written in asciidoc, one
# long HTML page: Debian's ninja-build in /usr/share/doc/ninja-build/manual.html, `--ninja`). As it is one page,
# NINJA_CHUNKS chunks spread evenly through it are taken (chunk indexes round(k*(n-1)/(NINJA_CHUNKS-1)), k = 0 …
# NINJA_CHUNKS-1, n = its chunk count: 50 for ninja-build 1.11.1, so chunks 0, 4, 8, 11, 15, 19, 23, 26, 30, 34, 38,
# 41, 45, 49), fixed here before any extraction output on it was seen; no chunk is skipped for what it holds.
NINJA_PAGES = {"blind15": ["manual.html"]}
# session 36's blind16 takes its documentation from a twelfth set: Python 3.11's documentation (Sphinx HTML, Debian's
# python3.11-doc in /usr/share/doc/python3.11/html, `--python-doc`), one chunk a third of the way into each of 14
# pages of its tutorial, HOWTOs, library and language references and FAQ, chosen before any extraction ran on them.
PYTHON_PAGES = {
    "blind16": [
        "tutorial/classes.html",
        "tutorial/errors.html",
        "tutorial/modules.html",
        "howto/logging.html",
        "howto/sorting.html",
        "howto/unicode.html",
        "howto/regex.html",
        "library/sqlite3.html",
        "library/asyncio-task.html",
        "library/functools.html",
        "library/subprocess.html",
        "library/gc.html",
        "reference/datamodel.html",
        "faq/design.html",
    ]
}
# session 36's second round, blind17, takes its documentation from a thirteenth set: the Debian Reference (an
# operating system's user and administrator guide, DocBook HTML: Debian's debian-reference-en 2.100 in
# /usr/share/debian-reference, `--debian-reference`), one chunk a third of the way into each of its 14 pages.
DEBIAN_REFERENCE_PAGES = {
    "blind17": ["pr01.en.html", *(f"ch{i:02d}.en.html" for i in range(1, 13)), "apa.en.html"],
}
NINJA_CHUNKS = 14
# session 36's third round, blind18, takes its documentation from a fourteenth set: Bash's manual page (GNU Bash 5.2's
# bash.html, one long page: Debian's bash-doc 5.2.15-2, `--bash-doc`), NINJA_CHUNKS chunks spread evenly through it as
# for the Ninja manual (344 chunks: 0, 26, 53, …, 343), fixed before any extraction output on it was seen.
BASH_PAGES = {"blind18": ["bash.html"]}
# its fourth round, blind19, takes a fifteenth set: zsh 5.9's manual (Texinfo HTML, Debian's zsh-doc in
# /usr/share/doc/zsh-common/html, `--zsh-doc`; read by session 34's documentation questions, never by extraction's
# rules or labels): every thirteenth of its 186 pages in name order from the first, one chunk a third into each.
ZSH_PAGES = {
    "blind19": [
        "Aliasing.html", "Calendar-Function-System.html", "Completion-Functions.html", "Control-Flags.html",
        "FAQ02.html", "Initialization.html", "Modifying-Text.html", "Parameters.html", "Shell-Builtin-Commands.html",
        "TCP-Parameters.html", "The-zsh_002fcurses-Module.html", "The-zsh_002fparam_002fprivate-Module.html",
        "The-zsh_002fzprof-Module.html", "Zftp-Functions.html",
    ]
}  # fmt: skip
# session 36's last split, blind20, labeled for the next session's read: Postfix 3.7's documentation (its READMEs and
# manual pages in HTML, Debian's postfix-doc in /usr/share/doc/postfix/html, `--postfix-doc`): every tenth of its 136
# pages in name order from the first, one chunk a third into each.
POSTFIX_PAGES = {
    "blind20": [
        "ADDRESS_CLASS_README.html", "CONTENT_INSPECTION_README.html", "LDAP_README.html", "NFS_README.html",
        "SCHEDULER_README.html", "TLS_README.html", "bounce.5.html", "generic.5.html", "master.8.html",
        "postalias.1.html", "postlock.1.html", "qmgr.8.html", "smtp-sink.1.html", "trace.8.html",
    ]
}  # fmt: skip
# session 37's blind21: Graphviz 2.42's documentation (its hand-written HTML pages, Debian's graphviz-doc in
# /usr/share/doc/graphviz/html, `--graphviz-doc`): each of its 16 pages (not the demo), one chunk a third into each.
GRAPHVIZ_PAGES = {
    "blind21": [
        "FAQ.html", "build.html", "char.html", "index.html", "internal_todo.html", "tcldot.html", "todo.html",
        "winbuild.html", "info/arrows.html", "info/attrs.html", "info/colors.html", "info/command.html",
        "info/index.html", "info/lang.html", "info/output.html", "info/shapes.html",
    ]
}  # fmt: skip
# its second round, blind22: gnuplot 5.4's manual (LaTeX2HTML pages, one section a page, Debian's gnuplot-doc in
# /usr/share/doc/gnuplot/htmldocs, `--gnuplot-doc`): every twentieth of its 650 node pages in name order from the
# first, one chunk a third into each.
GNUPLOT_PAGES = {
    "blind22": [
        "node1.html", "node117.html", "node135.html", "node153.html", "node171.html", "node19.html", "node207.html",
        "node225.html", "node243.html", "node261.html", "node28.html", "node298.html", "node315.html", "node333.html",
        "node351.html", "node37.html", "node388.html", "node405.html", "node423.html", "node441.html", "node46.html",
        "node478.html", "node496.html", "node513.html", "node531.html", "node55.html", "node568.html", "node586.html",
        "node603.html", "node621.html", "node64.html", "node72.html", "node90.html",
    ]
}  # fmt: skip
# session 38's blind23: BIND 9.18's Administrator Reference Manual (Sphinx HTML, a DNS server's manual: Debian's
# bind9-doc in /usr/share/doc/bind9-doc/arm, `--bind9-doc`): each of its 14 prose pages (not the indexes, the search
# page nor the release notes), one chunk a third into each.
BIND9_PAGES = {
    "blind23": [
        *(f"chapter{i}.html" for i in (1, 2, 3, 4, 5, 6, 7, 9, 10)),
        "dnssec-guide.html", "general.html", "history.html", "manpages.html", "reference.html",
    ]
}  # fmt: skip
# its second round, blind24: "An Introduction to R" (R 4.2's manual, Texinfo HTML on one page: Debian's r-doc-html in
# /usr/share/R/doc/manual/R-intro.html, `--r-intro`), NINJA_CHUNKS chunks spread evenly through it as for the Ninja
# manual, fixed before any extraction output on it was seen.
R_INTRO_PAGES = {"blind24": ["R-intro.html"]}
# its third round, blind25: GNU gettext 0.21's manual (Texinfo HTML, one chapter a page: Debian's gettext-doc in
# /usr/share/doc/gettext, `--gettext-doc`): every second of its 30 chapters from the first, one chunk a third into each.
GETTEXT_PAGES = {"blind25": [f"gettext_{i}.html" for i in range(1, 31, 2)]}
# and blind26: HAProxy 2.6's starter guide (intro.html, one long page: Debian's haproxy-doc in
# /usr/share/doc/haproxy/html, `--haproxy-intro`), NINJA_CHUNKS chunks spread evenly through it.
HAPROXY_PAGES = {"blind26": ["intro.html"]}
# Splits added after the file was first written, in order: their sources go last, so the older lines stay as they are.
LATER_SPLITS = (
    "blind7", "blind8", "blind9", "blind10", "blind11", "blind12", "blind13", "blind14", "blind15", "blind16",
    "blind17", "blind18", "blind19", "blind20", "blind21", "blind22", "blind23", "blind24", "blind25", "blind26",
)  # fmt: skip


def _scifact(path: Path) -> list[dict[str, Any]]:
    """Abstracts long enough to be cut into two or more chunks; dev from the start of the file,
    held-out from its second half, fresh from its last quarter, blind2 from its second quarter."""
    docs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    out: list[dict[str, Any]] = []
    for split, share in SCIFACT_START.items():
        start = int(share * len(docs))
        picked = [d for d in docs[start:] if len(d["text"].split()) > 230][: SCIFACT_DOCS[split]]
        for doc in picked:
            for i, chunk in enumerate(chunk_text(doc["text"], 180, 30)):
                out.append(_source(f"scifact-{doc['_id']}-c{i}", "scifact", split, doc["title"], chunk))
    return out


def _multihop(path: Path, questions_by_split: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The supporting paragraphs (one per title: the first, when a MuSiQue question has two under one title) of the
    chosen questions of a HotpotQA-format file; not a paragraph an earlier split took (blind21's MuSiQue 88 repeats
    blind15's "Namibia")."""
    items = json.loads(path.read_text(encoding="utf-8"))
    out: list[dict[str, Any]] = []
    for split, questions in questions_by_split.items():
        for q in questions:
            item = items[q]
            titles = {t for t, _ in item["supporting_facts"]}
            for title, sentences in item["context"]:
                if title in titles:
                    titles.discard(title)
                    if any(s["title"] == title and s["text"] == "".join(sentences) for s in out):
                        continue
                    out.append(_paragraph(name, q, "", split, title, sentences))
    return out


def _paragraph(name: str, q: int, tag: str, split: str, title: str, sentences: list[str]) -> dict[str, Any]:
    """A Wikipedia paragraph of question `q` of the `name` file ("hotpot", "musique") as a source; `tag` marks a
    distractor's id ("d-")."""
    sid = f"{name}-{q}-{tag}{title[:30].replace(' ', '_')}"
    return _source(sid, "hotpotqa" if name == "hotpot" else name, split, title, "".join(sentences))


def _distractors(
    path: Path, questions_by_split: dict[str, Any], name: str, taken: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Per chosen question, its first two distractor paragraphs (under no supporting title) whose article no earlier
    source (`taken`, or a distractor before it) took: fresh text of the same kind as the supporting paragraphs."""
    items = json.loads(path.read_text(encoding="utf-8"))
    titles_taken = {s["title"] for s in taken if s["corpus"] in ("hotpotqa", "musique")}
    out: list[dict[str, Any]] = []
    for split, questions in questions_by_split.items():
        for q in questions:
            supporting = {t for t, _ in items[q]["supporting_facts"]}
            picked = 0
            for title, sentences in items[q]["context"]:
                if picked == 2 or title in supporting or title in titles_taken:
                    continue
                titles_taken.add(title)
                picked += 1
                out.append(_paragraph(name, q, "d-", split, title, sentences))
    return out


def _hotpot(path: Path) -> list[dict[str, Any]]:
    return _multihop(path, HOTPOT_QUESTIONS, "hotpot")


def _musique(path: Path) -> list[dict[str, Any]]:
    return _multihop(path, MUSIQUE_QUESTIONS, "musique")


Picks = Callable[[str, str, list[str]], list[int]]  # (split, page, its chunks) -> the chunks taken


def _doc_chunks(folder: Path, pages: dict[str, list[str]], corpus: str, prefix: str, picks: Picks) -> list[dict]:
    """Sources from documentation pages: per split and page, the chunks `picks(split, page, chunks)` names."""
    out = []
    for split, names in pages.items():
        for page in names:
            title, text = read_html_file(folder / page)
            chunks = chunk_text(text, 180, 30)
            for i in picks(split, page, chunks):
                sid = f"{prefix}-{page[:-5].replace('/', '-')}-c{i}"
                out.append(_source(sid, corpus, split, title, chunks[i], url=page))
    return out


def _sqlite_picks(split: str, page: str, chunks: list[str]) -> list[int]:
    """Two chunks per page (a third and two thirds in), one for the later splits; the pragma page's
    synchronous chunks."""
    if page == "pragma.html":
        return [i for i, c in enumerate(chunks) if PRAGMA_MARK in c][:2]
    if split in ("fresh", "blind2", "dev2", "blind3", "blind4", "blind5"):
        return [len(chunks) // 2]
    return [len(chunks) // 3, 2 * len(chunks) // 3]


def _sqlite(folder: Path) -> list[dict[str, Any]]:
    return _doc_chunks(folder, SQLITE_PAGES, "sqlite", "sqlite", _sqlite_picks)


# The documentation sets after SQLite's: one chunk per page, a third of the way in. Option → (its pages, corpus,
# id prefix, help); main() adds them after MuSiQue's paragraphs in this order.
ONE_CHUNK_SETS = {
    "node_doc": (NODE_PAGES, "nodejs", "node", "folder of the Node.js API HTML pages (blind6's documentation)"),
    "rust_book": (RUST_PAGES, "rustbook", "rust", "folder of the Rust book's HTML chapters (blind7's docs)"),
    "cargo_book": (CARGO_PAGES, "cargobook", "cargo", "folder of the Cargo book's HTML pages (blind8's docs)"),
    "rustc_book": (RUSTC_PAGES, "rustcbook", "rustc", "folder of the rustc book's HTML pages (blind9's docs)"),
    "reference": (REFERENCE_PAGES, "rustreference", "ref", "folder of the Rust Reference's pages (blind10's docs)"),
    "nomicon": (NOMICON_PAGES, "nomicon", "nom", "folder of the Rustonomicon's HTML pages (blind11's docs)"),
    "valgrind": (VALGRIND_PAGES, "valgrind", "vg", "folder of the Valgrind manual's HTML pages (blind12's docs)"),
    "libffi": (LIBFFI_PAGES, "libffi", "ffi", "folder of the libffi manual's HTML pages (blind13's docs)"),
    "libxslt": (LIBXSLT_PAGES, "libxslt", "xslt", "folder of the libxslt HTML pages (blind14's docs)"),
    "python_doc": (PYTHON_PAGES, "pythondoc", "py", "folder of Python 3.11's HTML documentation (blind16's docs)"),
    "debian_reference": (
        DEBIAN_REFERENCE_PAGES,
        "debianref",
        "debref",
        "folder of the Debian Reference's HTML pages (blind17's docs)",
    ),
    "zsh_doc": (ZSH_PAGES, "zsh", "zsh", "folder of zsh's HTML manual (blind19's docs)"),
    "postfix_doc": (POSTFIX_PAGES, "postfix", "postfix", "folder of Postfix's HTML documentation (blind20's docs)"),
    "graphviz_doc": (GRAPHVIZ_PAGES, "graphviz", "graphviz", "folder of Graphviz's HTML documentation (blind21's)"),
    "gnuplot_doc": (GNUPLOT_PAGES, "gnuplot", "gnuplot", "folder of gnuplot's HTML manual, htmldocs (blind22's)"),
    "bind9_doc": (BIND9_PAGES, "bind9", "bind9", "folder of BIND 9's HTML reference manual, arm (blind23's)"),
    "gettext_doc": (GETTEXT_PAGES, "gettext", "gettext", "folder of GNU gettext's HTML manual (blind25's)"),
}


# The one-page manuals: NINJA_CHUNKS chunks spread through the page (`_spread_evenly`); the option names the page's
# file or its folder. Option → (its pages, corpus, id prefix, help), added after ONE_CHUNK_SETS in this order.
SPREAD_SETS = {
    "ninja": (NINJA_PAGES, "ninja", "ninja", "the Ninja manual's manual.html or its folder (blind15's docs)"),
    "bash_doc": (BASH_PAGES, "bash", "bash", "Bash's bash.html or its folder (blind18's docs)"),
    "r_intro": (R_INTRO_PAGES, "rintro", "rintro", "R's R-intro.html or its folder (blind24's docs)"),
    "haproxy_intro": (HAPROXY_PAGES, "haproxy", "haproxy", "HAProxy's intro.html or its folder (blind26's docs)"),
}


def _a_third_in(split: str, page: str, chunks: list[str]) -> list[int]:
    return [len(chunks) // 3]


def _spread_evenly(split: str, page: str, chunks: list[str]) -> list[int]:
    """NINJA_CHUNKS chunks of a one-page manual, evenly spaced from its first chunk to its last."""
    last = len(chunks) - 1
    return sorted({round(k * last / (NINJA_CHUNKS - 1)) for k in range(NINJA_CHUNKS)})


# Where each documentation set's pages live (the url a labeled source carries: page path appended).
DOC_URLS = {
    "sqlite": "file:///usr/share/doc/sqlite3/",
    "nodejs": "file:///usr/share/doc/nodejs/api/",
    "rustbook": "https://doc.rust-lang.org/book/",
    "cargobook": "https://doc.rust-lang.org/cargo/",
    "rustcbook": "https://doc.rust-lang.org/rustc/",
    "rustreference": "https://doc.rust-lang.org/reference/",
    "nomicon": "https://doc.rust-lang.org/nomicon/",
    "valgrind": "file:///usr/share/doc/valgrind/html/",
    "libffi": "file:///usr/share/doc/libffi8/html/",
    "libxslt": "file:///usr/share/doc/libxslt1-dev/html/",
    "ninja": "file:///usr/share/doc/ninja-build/",
    "pythondoc": "file:///usr/share/doc/python3.11/html/",
    "debianref": "file:///usr/share/debian-reference/",
    "bash": "file:///usr/share/doc/bash/",
    "zsh": "file:///usr/share/doc/zsh-common/html/",
    "postfix": "file:///usr/share/doc/postfix/html/",
    "graphviz": "file:///usr/share/doc/graphviz/html/",
    "gnuplot": "file:///usr/share/doc/gnuplot/htmldocs/",
    "bind9": "file:///usr/share/doc/bind9-doc/arm/",
    "rintro": "file:///usr/share/R/doc/manual/",
    "gettext": "file:///usr/share/doc/gettext/",
    "haproxy": "file:///usr/share/doc/haproxy/html/",
}


def _source(sid: str, corpus: str, split: str, title: str, text: str, url: str = "") -> dict[str, Any]:
    if corpus in DOC_URLS:
        url = DOC_URLS[corpus] + url
    elif corpus in ("hotpotqa", "musique"):
        url = "https://en.wikipedia.org/wiki/" + title.replace(" ", "_")
    else:
        url = f"https://scifact.example/{sid.split('-')[1]}"
    return {"id": sid, "corpus": corpus, "split": split, "title": title, "topic": title, "url": url, "text": text}


def sentence_candidates(text: str) -> list[str]:
    """Every block sentence as today's cleaner returns it, or as written when it rejects it."""
    import extraction_baseline as baseline

    out = []
    for sentence in block_sentences(text):
        cleaned = baseline._clean_sentence(sentence)
        out.append(cleaned if cleaned is not None else normalize_space(sentence))
    return out


def extracted(source: dict[str, Any], which: str) -> list[str]:
    """The facts an extractor stores from one source (baseline = today's, new = this branch's)."""
    if which == "baseline":
        import extraction_baseline as baseline

        result = baseline.extract_facts(source["text"], source["url"], topic=source["topic"], max_facts=5)
    else:
        from deepresearch.models import extract

        result = extract.extract_facts(
            source["text"], source["url"], topic=source["topic"], max_facts=5, title=source["title"]
        )
    return [f.fact for f in result.facts]


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def add_candidates(sources: list[dict[str, Any]], extractors: list[str], main_commit: str = "") -> int:
    """Append every unlabeled candidate of each source to the labels file; return how many."""
    rows = load_jsonl(LABELS)
    known = {(r["source"], normalize_text(r["fact"])) for r in rows}
    added = 0
    main_runs: dict[str, Any] = {}
    if "main" in extractors:  # main's extraction (eval_extraction.MAIN_COMMIT), all sources in one process
        import eval_extraction

        main_runs = eval_extraction.run_main(sources, 5, main_commit or eval_extraction.MAIN_COMMIT)
    for source in sources:
        texts = sentence_candidates(source["text"])
        for which in extractors:
            texts += [f.fact for f in main_runs[source["id"]]["facts"]] if which == "main" else extracted(source, which)
        for text in texts:
            key = (source["id"], normalize_text(text))
            if key in known or not text.strip():
                continue
            known.add(key)
            rows.append(
                {
                    "id": f"{source['id']}-{sum(r['source'] == source['id'] for r in rows):02d}",
                    "source": source["id"],
                    "corpus": source["corpus"],
                    "split": source["split"],
                    "fact": text,
                    "standalone": None,
                    "claim": None,
                    "complete": None,
                    "category": None,
                }
            )
            added += 1
    write_jsonl(LABELS, rows)
    return added


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scifact", type=Path, help="BEIR SciFact corpus.jsonl")
    parser.add_argument("--hotpotqa", type=Path, help="hotpotqa_train.json")
    parser.add_argument("--sqlite-doc", type=Path, help="folder of the sqlite3-doc HTML pages")
    parser.add_argument("--musique", type=Path, help="musique_train.json (blind5's and blind6's paragraphs)")
    for dest, (*_, help_text) in {**ONE_CHUNK_SETS, **SPREAD_SETS}.items():
        parser.add_argument(f"--{dest.replace('_', '-')}", type=Path, help=help_text)
    parser.add_argument("--main-commit", default="", help="main's commit for `--extractors main` (eval's MAIN_COMMIT)")
    parser.add_argument("--extractors", nargs="*", default=["baseline"], choices=["baseline", "main", "new"])
    args = parser.parse_args()
    if args.scifact and args.hotpotqa and args.sqlite_doc:
        sources = _scifact(args.scifact) + _hotpot(args.hotpotqa) + _sqlite(args.sqlite_doc)
        sources += _musique(args.musique) if args.musique else []
        sources += _distractors(args.hotpotqa, HOTPOT_DISTRACTORS, "hotpot", sources)
        sources += _distractors(args.musique, MUSIQUE_DISTRACTORS, "musique", sources) if args.musique else []
        for dest, (pages, corpus, prefix, _) in ONE_CHUNK_SETS.items():
            folder = getattr(args, dest)
            sources += _doc_chunks(folder, pages, corpus, prefix, _a_third_in) if folder else []
        for dest, (pages, corpus, prefix, _) in SPREAD_SETS.items():  # one page: chunks spread through it
            path = getattr(args, dest)
            folder = path.parent if path and path.is_file() else path
            sources += _doc_chunks(folder, pages, corpus, prefix, _spread_evenly) if folder else []
        # stable: the older sources keep their order, each later split after the ones before it
        sources.sort(key=lambda s: LATER_SPLITS.index(s["split"]) + 1 if s["split"] in LATER_SPLITS else 0)
        write_jsonl(SOURCES, sources)
    else:  # re-use the shipped sources (e.g. to add the new extraction's outputs)
        sources = load_jsonl(SOURCES)
    added = add_candidates(sources, args.extractors, args.main_commit)
    print(f"{len(sources)} sources, {added} new candidates to label in {LABELS}")


if __name__ == "__main__":
    main()
