"""Fact categories: a nearest-prototype rule on sentence embeddings, cue words as the fallback.

The category decides a fact's TTL and decay (README, "Fact lifecycle"), so it should say how a claim ages:
- market_data: figures that move week to week — prices, shares, sales, revenue, growth;
- product_info: what a product or service offers now — features, settings, defaults,
  versions, releases, support; changes with the next release;
- strategy: intentions and deals — plans, investments, partnerships, acquisitions, targets;
- technology: how things work — mechanisms, principles, architectures, standards, protocols,
  algorithms, scientific findings;
- historical: what happened and does not change — births, deaths, foundings, elections,
  events, dated milestones, biographies, works and their dates.

`LinearCategorizer` (the default) is a softmax regression on the sentence's embedding beside its
source's title's (zeros when there is none: a claim about a river under "Atbarah River" is history, the
same words under a software page's title are not), fitted once per embedder and process (~0.1 s,
numpy; stored in the model cache) on the category prototypes below and the hand-labeled claims of
tests/data/extraction_labels.jsonl but its newest blind split (models/data/category_examples.json,
each with its source's title, and each also without one, so a fact without a title is classified by
its own words). It also carries the learned stands-alone check on the same embedder
(`.standalone`, models/standalone.py), which extraction applies after the rules.
`PrototypeCategorizer` embeds each category's description and example claims (written for this
module, none from the evaluation sets) and files a fact under the category whose prototypes are
nearest (score = mean of the two most similar prototypes of a category). When either is unsure — the
two best categories within `margin` of each other — the fact goes to the shorter-lived of the two
(CATEGORIES is ordered by TTL): a fact re-checked too early costs a search; one kept too long is a
stale answer.
`RuleCategorizer` (cue words, unknown → strategy) is what is used when no embedding model can be
loaded, and for CJK text (English examples, MiniLM).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from deepresearch.errors import DeepResearchError
from deepresearch.facts import CATEGORIES, DEFAULT_CATEGORY
from deepresearch.models.fitting import adam
from deepresearch.text import has_cjk

if TYPE_CHECKING:
    import numpy as np

    from deepresearch.models.base import Embedder
    from deepresearch.models.llm import ChatModel
    from deepresearch.models.standalone import StandaloneModel

log = logging.getLogger(__name__)

# Measured on the dev part of tests/data/extraction_labels.jsonl (docs/BENCHMARKS.md, session 11).
UNSURE_MARGIN = 0.01

# fmt: off
PROTOTYPES: dict[str, list[str]] = {
    "market_data": [
        "Market data: prices, market shares, sales figures, revenue, growth rates and rankings that change often.",
        "The company's market share rose to 23 percent in the third quarter.",
        "Shares of the firm fell 4% to $212 on Tuesday.",
        "Quarterly revenue grew 18% year over year to $4.1 billion.",
        "The vendor shipped 12 million units last quarter, ranking second worldwide.",
        "The average selling price of the device dropped to $399.",
        "Sales of electric cars doubled compared with last year.",
    ],
    "product_info": [
        "Product information: the features, specifications, settings, defaults, versions and releases of a product.",
        "Version 3.2 of the app adds offline mode and a dark theme.",
        "The laptop ships with 16 GB of memory and an eight-core processor.",
        "The library supports JSON export and can be configured with a command-line option.",
        "The default value of the timeout setting is 30 seconds.",
        "The new model was released in March and is available in three colours.",
        "Starting with release 2.0, the tool can read compressed files.",
        "The service offers a free tier limited to 1,000 requests per day.",
        "This option is intended only for testing and may change in a future release.",
        "The command returns the current value of the setting as an integer.",
        "The browser uses an embedded database to store bookmarks and history.",
    ],
    "strategy": [
        "Strategy: plans, intentions, investments, partnerships, acquisitions and targets of an organization.",
        "The company plans to open five new factories by 2027.",
        "The two firms agreed to a partnership to develop batteries together.",
        "The group announced it will acquire its rival for an undisclosed sum.",
        "The government intends to invest heavily in renewable energy over the next decade.",
        "Management aims to cut costs and expand into Asian markets.",
    ],
    "technology": [
        "Technology and science: how something works — mechanisms, principles, architectures, standards, "
        "protocols, algorithms and scientific findings.",
        "The protocol encrypts each message with a session key negotiated during the handshake.",
        "A write-ahead log records changes before they are applied to the main data file.",
        "The algorithm sorts the list by repeatedly merging sorted halves.",
        "Readers do not block writers because each reader sees a consistent snapshot.",
        "The enzyme binds to the receptor and suppresses the inflammatory response.",
        "Higher temperatures increase the rate of the chemical reaction.",
        "The gene is expressed in immune cells and regulates cell growth.",
        "Lock-free data structures let several threads update shared memory without mutual exclusion.",
        "The protein is found in the nucleus of most cells and binds DNA.",
        "Imaging showed clear differences in brain tissue between the two groups of patients.",
        "Blood samples are a common source of material for clinical tests.",
        "The cleanup step repeats until the log file is small enough.",
        "The interpreter tracks the type of every value internally.",
    ],
    "historical": [
        "History: events that happened and do not change — births, deaths, foundings, elections, battles, "
        "biographies and dated milestones.",
        "The writer was born in 1899 and died in 1985.",
        "The company was founded in 1976 in a garage in California.",
        "She was elected mayor in 1993 and served two terms.",
        "The battle ended with the defeat of the invading army in 1066.",
        "The band released its debut album in 1977 and toured Europe.",
        "He was an American actor best known for his roles in westerns.",
        "The film, directed by a Korean director, premiered in 2011.",
        "The magazine has been published since 1922.",
        "The project began as a small add-on and later grew into a standalone program.",
        "He ran for the Senate in 2007 and received few votes.",
        "The institute held public lectures and debates until it closed.",
    ],
}
# fmt: on


class Categorizer(Protocol):
    """Assigns one of CATEGORIES to each fact text."""

    name: str

    def categorize(self, texts: list[str], title: str = "") -> list[str]:
        """One category per text (`title`: the title of the source they come from, when known)."""
        ...


# --- cue words (the fallback) -------------------------------------------------------------

# Cue patterns per category (English and Chinese); each matching pattern scores 1, a
# strong cue 2 more.
# fmt: off
_CATEGORY_RULES: dict[str, list[str]] = {
    "market_data": [
        r"market share", r"\bshares? of\b", r"\bprices?d?\b", r"\brevenues?\b", r"\bsales\b", r"\bsold\b",
        r"\bstock\b", r"\bvaluation\b", r"\bvalued at\b", r"\bmarket cap", r"\b(?:was|is|are) ranked\b",
        r"\branked (?:no\.|#|first|second|third|\d)", r"\brankings?\b",
        r"\bgrowth\b", r"\bgrew\b", r"\bprofit", r"\bearnings\b", r"\bshipments?\b", r"\bunits\b",
        r"\$\s?\d", r"€\s?\d", r"\d\s?%", r"\bpercent\b", r"\b(?:million|billion|trillion)\b",
        r"\bbox office\b", r"\bgross(?:ed)?\b",
        r"市场", r"份额", r"价格", r"营收", r"收入", r"销量", r"出货", r"增长", r"排名",
    ],
    "product_info": [
        r"\bversion\b", r"\bv\d", r"\breleased?\b", r"\blaunch(?:ed|es)?\b", r"\bfeatures?\b", r"\bspecs?\b",
        r"\bspecifications?\b", r"\bsupports?\b", r"\bmodels?\b", r"\bdevices?\b", r"\bproducts?\b",
        r"\bapp\b", r"\bsoftware\b", r"\bupdate\b", r"\bgames?\b", r"\balbums?\b", r"\bsingles?\b",
        r"\bfilms?\b", r"\bnovels?\b", r"\bseries\b", r"\bpublished\b", r"\bGB\b", r"\bGHz\b", r"\bcores?\b",
        r"发布", r"版本", r"功能", r"产品", r"型号", r"规格",
    ],
    "strategy": [
        r"\bplans?\b", r"\bplanned\b", r"\bstrateg", r"\binvest", r"\bpartner", r"\bacqui", r"\bmerger\b",
        r"\bmerged?\b", r"\bexpan", r"\btarget", r"\bwill\b", r"\bintends?\b", r"\bagreement\b", r"\bdeal\b",
        r"\bjoint venture\b", r"\bfund(?:ing|ed)\b", r"\balliance\b",
        r"计划", r"战略", r"投资", r"合作", r"收购",
    ],
    "technology": [
        r"\balgorithms?\b", r"\bprotocols?\b", r"\barchitectures?\b", r"\bstandards?\b", r"\bmethods?\b",
        r"\bprinciples?\b", r"\btechniques?\b", r"\btechnolog", r"\bsystems?\b", r"\bbased on\b", r"\buses\b",
        r"\bcomputes?\b", r"\bmechanism\b", r"\btheory\b", r"\bequations?\b", r"\bchips?\b", r"\bnetworks?\b",
        r"\bencryption\b", r"\bscientific\b", r"\bchemical\b", r"\bphysics\b",
        r"\b(?:file )?formats?\b", r"\bindex(?:es)?\b", r"\bqueries\b", r"\bvectors?\b", r"\bdatabases?\b",
        r"\bfunctions?\b", r"\bextensions?\b", r"\btokenizers?\b", r"\btables?\b", r"\bsumm?(?:s|ing)?\b",
        r"\bscores?\b", r"\bcalculat", r"\bembeddings?\b",
        r"技术", r"协议", r"架构", r"标准", r"算法", r"原理",
    ],
    "historical": [
        # "created"/"built"/"formed" alone describe how things work ("a table is created with …");
        # only a date makes them history.
        r"\bborn\b", r"\bdied\b", r"\bfounded\b", r"\bestablished\b",
        r"\b(?:formed|created|built) in (?:1[0-9]|20)\d\d\b", r"\bwar\b", r"\bbattle\b", r"\bcentury\b",
        r"\bhistor", r"\bdynasty\b", r"\belected\b",
        r"\bappointed\b", r"\bwon\b", r"\bawarded\b", r"\bopened\b", r"\bwas (?:a|an|the)\b",
        r"\bin (?:1[0-9]|20)\d\d\b", r"\bfrom (?:1[0-9]|20)\d\d\b",
        r"成立", r"创立", r"出生", r"去世", r"历史", r"年",
    ],
}
STRONG_CUES: dict[str, str] = {
    "market_data": r"market share|市场份额|\$\s?\d|\d\s?%",
    "historical": r"\b(?:born|died|founded|established)\b|成立|出生|去世",
    "technology": r"\b(?:algorithm|protocol|architecture)s?\b",
}
# fmt: on
_COMPILED_RULES = {c: [re.compile(p, re.IGNORECASE) for p in pats] for c, pats in _CATEGORY_RULES.items()}
COMPILED_STRONG = {c: re.compile(p, re.IGNORECASE) for c, p in STRONG_CUES.items()}


def classify_category(text: str) -> str:
    """Rule-based category: the category whose cue words match most; no cue → strategy."""
    scores = {c: sum(1 for rule in rules if rule.search(text)) for c, rules in _COMPILED_RULES.items()}
    for category, rule in COMPILED_STRONG.items():
        scores[category] += 2 if rule.search(text) else 0
    best = max(scores.values())
    if best == 0:
        return DEFAULT_CATEGORY
    # Ties go to the shorter-lived category: a price that is also "historical" should be re-checked.
    return next(c for c in CATEGORIES if scores[c] == best)


class RuleCategorizer:
    """Cue words per category (no model needed); unknown → strategy."""

    name = "rules"

    def categorize(self, texts: list[str], title: str = "") -> list[str]:
        """Cue words of each text (the title is not used)."""
        return [classify_category(t) for t in texts]


# --- nearest prototype --------------------------------------------------------------------


_PROTOTYPE_VECTORS: weakref.WeakKeyDictionary[Any, dict[str, np.ndarray]] = weakref.WeakKeyDictionary()


# A claim bound to a release — "Beginning with SQLite version 3.23.0 …", "… only recognized by version 3.37.0 and
# later", "… currently only supports …", "… now throws …", "Version 2.4 of the editor adds …", "SQLite 3.35 added …"
# — changes with the next release: product_info, whatever the embedding says (the classifier filed such claims under
# technology; all 5 labeled ones are product_info). The last form, what a release adds or removes (session 38: with
# blind17 … blind22's documentation claims among the examples, "Version 2.4 of the editor adds a spell checker" came
# out technology), matches 1 labeled claim (product_info) and 1 of 16,649 unlabeled sentences ("Version 2.8 introduces
# two powerful new features …").
RELEASE_CUE = re.compile(
    r"\b(?:(?:version|release|v)\s?\d[\w.]*(?: of (?:the )?[\w.\- ]{1,30}?)?|[A-Z][\w+\-]* v?\d+(?:\.\d+)+) "
    r"(?:adds|added|introduces|introduced|removes|removed|drops|dropped|deprecates|deprecated)\b|"
    r"\b(?:(?:beginning|starting) with|as of|since|in|from) (?:[\w.\-]+ )?(?:version|release|v)\s?\d|"
    r"\bversions? \d[\w.]*(?: \([^()]*\))? (?:and|or) (?:later|newer|above|higher|greater)\b|"
    r"\bcurrently (?:only )?supports?\b|\bnow (?:throws|returns|emits|accepts|supports|requires)\b",
    re.IGNORECASE,
)


class _EmbeddingCategorizer:
    """What the embedding categorizers share: the best-scoring category per text, the shorter-lived
    of the best two when they are within `margin`; CJK text by cue words (the examples are
    English, and so is MiniLM). Subclasses give `scores`."""

    margin: float

    def scores(self, texts: list[str], title: str = "") -> list[dict[str, float]]:
        raise NotImplementedError

    def categorize(self, texts: list[str], title: str = "") -> list[str]:
        """One category per text, in order (`title`: their source's, when known)."""
        latin = [t for t in texts if not has_cjk(t)]
        chosen = iter([self.choose(s) for s in self.scores(latin, title)])
        out = [classify_category(t) if has_cjk(t) else next(chosen) for t in texts]
        return ["product_info" if RELEASE_CUE.search(t) else c for t, c in zip(texts, out, strict=True)]

    def choose(self, scores: dict[str, float]) -> str:
        """The best category; within `margin` of the runner-up, the shorter-lived of the two."""
        return choose_or_shorter_lived(scores, self.margin)


class PrototypeCategorizer(_EmbeddingCategorizer):
    """Nearest category prototypes in embedding space; unsure → the shorter-lived of the best two."""

    name = "prototype"

    def __init__(self, embedder: Embedder, margin: float = UNSURE_MARGIN):
        self.embedder = embedder
        self.margin = margin
        self._vectors: dict[str, np.ndarray] | None = None

    def _prototypes(self) -> dict[str, np.ndarray]:
        if self._vectors is None:
            # Embedded once per embedder and process: each research run builds its own categorizer.
            cached = _PROTOTYPE_VECTORS.get(self.embedder)
            if cached is None:
                cached = {c: self.embedder.embed_batch(PROTOTYPES[c]) for c in CATEGORIES}
                _PROTOTYPE_VECTORS[self.embedder] = cached
            self._vectors = cached
        return self._vectors

    def scores(self, texts: list[str], title: str = "") -> list[dict[str, float]]:
        """Per text, each category's score: mean cosine of its two nearest prototypes (title not used)."""
        import numpy as np

        if not texts:
            return []
        vectors = self.embedder.embed_batch(texts)
        per_category = {}
        for category, protos in self._prototypes().items():
            sims = np.sort(vectors @ protos.T, axis=1)[:, -2:]
            per_category[category] = sims.mean(axis=1)
        return [{c: float(per_category[c][i]) for c in CATEGORIES} for i in range(len(texts))]


# --- a linear classifier over labeled claims (the default) ----------------------------------

# L2 strength of the softmax regression (C as in scikit-learn: larger = weaker), fixed steps of Adam, and the
# weight of the title's embedding beside the sentence's. Chosen leave-one-split-out on the eight splits before
# blind6 (docs/BENCHMARKS.md, session 15): the sentence alone 0.892 (C = 3; 0.884 at C = 10), with the title
# 0.912 (C = 3, weight 1; 0.901 at C = 10, 0.908-0.910 at weight 1.5-2).
LINEAR_C = 3.0
TITLE_WEIGHT = 1.0
# The prototypes are what the classifier knows of market figures, plans and releases (the labeled claims, two rows
# each, hold no market figure and three plans), so they keep a fixed share of the training rows as the labeled set
# grows: each counts `prototype_weight` times, at least PROTOTYPE_MIN_WEIGHT. At a fixed 3 (session 15: "Shares of
# the chip maker rose 7% to $131 …" technology at 1, market_data at 3) the share fell from ~8% to ~4% as blind
# splits joined, and at 2,001 claims "Version 2.4 of the editor adds a spell checker …" became technology; at a
# share of 0.075 (6 each) it is product_info again. Leave-one-split-out accuracy over the 15 trained splits hardly
# moves with the weight: 0.944 at 3, 0.942 at 5 and 6, 0.943 at 7 (docs/BENCHMARKS.md, session 22).
PROTOTYPE_SHARE = 0.075
PROTOTYPE_MIN_WEIGHT = 3
LINEAR_STEPS = 300
# Unsure: the best two categories' probabilities within this of each other.
LINEAR_UNSURE_MARGIN = 0.05

_LINEAR_WEIGHTS: weakref.WeakKeyDictionary[Any, tuple[np.ndarray, np.ndarray]] = weakref.WeakKeyDictionary()


def shipped_examples() -> list[tuple[str, str, str]]:
    """The labeled (category, claim, source title) examples shipped in models/data/category_examples.json:
    the claims of tests/data/extraction_labels.jsonl but those of its newest blind split (measured on)."""
    data = json.loads((Path(__file__).parent / "data" / "category_examples.json").read_text(encoding="utf-8"))
    return [(category, text, title) for category, text, title in data["examples"]]


def prototype_weight(labeled_rows: int) -> int:
    """How many times each prototype counts beside `labeled_rows` labeled rows: PROTOTYPE_SHARE of them
    spread over the prototypes, at least PROTOTYPE_MIN_WEIGHT."""
    prototypes = sum(map(len, PROTOTYPES.values()))
    return max(PROTOTYPE_MIN_WEIGHT, round(PROTOTYPE_SHARE * labeled_rows / prototypes))


def training_set(
    extra: list[tuple[str, str, str]] | None = None,
) -> tuple[list[str], list[int], list[str]]:
    """Texts, category indexes and titles the classifier learns from: the labeled (category, text, title)
    examples (default: the shipped ones), each titled one also without its title (a source may have none),
    and the prototypes (no title, `prototype_weight` times each)."""
    examples = shipped_examples() if extra is None else extra
    labeled = list(examples) + [(c, text, "") for c, text, title in examples if title]
    prototypes = [(c, text, "") for c in CATEGORIES for text in PROTOTYPES[c]]
    rows = prototypes * prototype_weight(len(labeled)) + labeled
    return [t for _, t, _ in rows], [CATEGORIES.index(c) for c, _, _ in rows], [title for *_, title in rows]


def with_titles(vectors: np.ndarray, title_vectors: np.ndarray) -> np.ndarray:
    """The classifier's input rows: each sentence's embedding beside its title's (weighted; zeros: no title)."""
    import numpy as np

    return np.hstack([vectors, TITLE_WEIGHT * title_vectors])


def embed_titles(embedder: Embedder, titles: list[str]) -> np.ndarray:
    """One row per title: its embedding, zeros for a blank title (each distinct title embedded once)."""
    import numpy as np

    distinct = [t for t in dict.fromkeys(titles) if t.strip()]
    vectors = dict(zip(distinct, embedder.embed_batch(distinct), strict=True)) if distinct else {}
    zero = np.zeros(embedder.dimension)
    return np.asarray([vectors.get(t, zero) if t.strip() else zero for t in titles])


def fit_examples(
    embedder: Embedder, examples: list[tuple[str, str, str]] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The softmax regression fitted on the prototypes and `examples` (default: the shipped ones)."""
    import numpy as np

    texts, labels, titles = training_set(examples)
    distinct = list(dict.fromkeys(texts))  # each example is a row twice, each prototype several times
    vectors = dict(zip(distinct, embedder.embed_batch(distinct), strict=True))
    rows = np.asarray([vectors[t] for t in texts])
    return fit_softmax(with_titles(rows, embed_titles(embedder, titles)), labels)


def fit_softmax(
    x: np.ndarray, y: list[int], c: float = LINEAR_C, steps: int = LINEAR_STEPS
) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic regression (L2, mean log-loss + |W|²/(2·c·n)) by full-batch Adam; numpy only."""
    import numpy as np

    n, d = x.shape
    onehot = np.eye(len(CATEGORIES))[y]

    def gradients(params: list[np.ndarray]) -> list[np.ndarray]:
        error = softmax(x @ params[0] + params[1]) - onehot
        return [x.T @ error / n + params[0] / (c * n), error.mean(axis=0)]

    params = adam([np.zeros((d, len(CATEGORIES))), np.zeros(len(CATEGORIES))], gradients, steps, 0.1)
    return params[0], params[1]


def softmax(z: np.ndarray) -> np.ndarray:
    """Row-wise softmax."""
    import numpy as np

    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


class LinearCategorizer(_EmbeddingCategorizer):
    """Softmax regression on the sentence's and its source title's embeddings, fitted (once per embedder
    and process) on the category prototypes and the labeled claims; unsure → the shorter-lived of the best two."""

    name = "linear"

    def __init__(
        self,
        embedder: Embedder,
        margin: float = LINEAR_UNSURE_MARGIN,
        examples: list[tuple[str, str, str]] | None = None,
        standalone: StandaloneModel | None = None,
    ):
        from deepresearch.models.standalone import StandaloneCheck, shipped_model

        self.embedder = embedder
        self.margin = margin
        self.examples = examples  # None: the shipped examples (models/data/category_examples.json)
        self._weights: tuple[np.ndarray, np.ndarray] | None = None
        self._title: tuple[str, np.ndarray] | None = None  # the last title and its row (a source's facts share it)
        # the learned stands-alone check on the same embeddings (models/standalone.py; None: the shipped weights)
        self.standalone = StandaloneCheck(embedder, standalone or shipped_model())

    def _fit(self) -> tuple[np.ndarray, np.ndarray]:
        if self._weights is None:
            if self.examples is not None:
                self._weights = fit_examples(self.embedder, self.examples)
                return self._weights
            cached = _LINEAR_WEIGHTS.get(self.embedder)
            if cached is None:
                cached = _stored_fit(self.embedder)
                _LINEAR_WEIGHTS[self.embedder] = cached
            self._weights = cached
        return self._weights

    def probabilities(self, texts: list[str], title: str = "") -> list[dict[str, float]]:
        """Per text, each category's probability (`title`: their source's; blank when unknown)."""
        import numpy as np

        if not texts:
            return []
        weights, bias = self._fit()
        if self._title is None or self._title[0] != title:  # the check just embedded it: reused, not embedded again
            row = self.standalone.embed([title])[0] if title.strip() else np.zeros(self.embedder.dimension)
            self._title = (title, row)
        vectors = self.standalone.embed(texts)  # a checked fact is not embedded twice
        p = softmax(with_titles(vectors, np.tile(self._title[1], (len(texts), 1))) @ weights + bias)
        return [{c: float(p[i, j]) for j, c in enumerate(CATEGORIES)} for i in range(len(texts))]

    def scores(self, texts: list[str], title: str = "") -> list[dict[str, float]]:
        """The classifier's scores are its probabilities."""
        return self.probabilities(texts, title)


WEIGHTS_FILE = Path(__file__).parent / "data" / "category_weights.json"


def fit_key(embedder: Embedder) -> str:
    """What a fit depends on, hashed: the embedder, the training set and the fit's settings."""
    texts, labels, titles = training_set()
    what = [type(embedder).__name__, embedder.model_id, embedder.dimension, texts, labels, titles, TITLE_WEIGHT]
    return hashlib.sha256(json.dumps([*what, LINEAR_C, LINEAR_STEPS]).encode()).hexdigest()[:20]


def shipped_fit(key: str, dimension: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The fit shipped in models/data/category_weights.json (written by scripts/build_standalone_weights.py
    --write for the default embedder) when it was made for `key`, else None."""
    import numpy as np

    try:
        data = json.loads(WEIGHTS_FILE.read_text(encoding="utf-8"))
        weights, bias = np.asarray(data["weights"], dtype=float), np.asarray(data["bias"], dtype=float)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.info("no usable shipped category weights (%s): fitting", exc)
        return None
    if data.get("key") != key or weights.shape != (2 * dimension, len(CATEGORIES)) or bias.shape != (len(CATEGORIES),):
        return None
    return weights, bias


def _stored_fit(embedder: Embedder) -> tuple[np.ndarray, np.ndarray]:
    """The classifier's weights for this embedder: the shipped fit for the default embedder, else a fit
    kept in the model cache (embedding its ~950 training sentences and titles costs 5–12 s on a small
    machine, a stored fit 0.01 s). Both are keyed on the embedder, the training set and the fit's
    settings (`fit_key`), so a change to any of them fits anew."""
    import numpy as np

    from deepresearch.models.shipped import model_cache_dir

    key = fit_key(embedder)
    shipped = shipped_fit(key, embedder.dimension)
    if shipped is not None:
        return shipped
    path = model_cache_dir() / f"categories-{key}.npz"
    try:
        with np.load(path) as stored:
            weights, bias = stored["weights"], stored["bias"]
        if weights.shape == (2 * embedder.dimension, len(CATEGORIES)) and bias.shape == (len(CATEGORIES),):
            return weights, bias
    except (OSError, KeyError, ValueError) as exc:
        log.debug("category weights not stored yet (%s)", exc)
    weights, bias = fit_examples(embedder)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        with partial.open("wb") as out:
            np.savez(out, weights=weights, bias=bias)
        os.replace(partial, path)
    except OSError as exc:  # a read-only cache: fit again next time
        log.info("cannot store the category weights in %s: %s", path.parent, exc)
    return weights, bias


def choose_or_shorter_lived(scores: dict[str, float], margin: float) -> str:
    """The best category; within `margin` of the runner-up, the shorter-lived of the two."""
    best, second = sorted(scores, key=lambda c: -scores[c])[:2]
    if scores[best] - scores[second] < margin:
        return min(best, second, key=CATEGORIES.index)
    return best


# --- the chat model through the category enum (measured; see docs/BENCHMARKS.md) -----------

_MODEL_SYSTEM = (
    "You file facts for a knowledge base. Pick the category that says how the fact ages: "
    "market_data (prices, shares, sales, revenue, growth: changes weekly); product_info (features, settings, "
    "defaults, versions, releases of a product); strategy (plans, investments, partnerships, acquisitions); "
    "technology (how something works: mechanisms, principles, architectures, protocols, scientific findings); "
    "historical (what happened and does not change: births, deaths, foundings, events, biographies, works)."
)
MODEL_SCHEMA = {
    "type": "object",
    "properties": {"category": {"type": "string", "enum": list(CATEGORIES)}},
    "required": ["category"],
}


class ModelCategorizer:
    """The chat model chooses from the category enum (constrained decoding); the fallback decides
    when its answer is unusable."""

    name = "model"

    def __init__(self, model: ChatModel, fallback: Categorizer | None = None):
        self.model = model
        self.fallback = fallback or RuleCategorizer()

    def categorize(self, texts: list[str], title: str = "") -> list[str]:
        """The model's choice per text (the title is not used)."""
        from deepresearch.models.llm import complete_json

        out = []
        for text in texts:
            messages = [{"role": "system", "content": _MODEL_SYSTEM}, {"role": "user", "content": f"Fact: {text}"}]
            data = complete_json(self.model, messages, MODEL_SCHEMA, max_tokens=20)
            chosen = data.get("category") if isinstance(data, dict) else None
            out.append(chosen if chosen in CATEGORIES else self.fallback.categorize([text])[0])
        return out


_DEFAULT: list[Categorizer] = []


def default_categorizer() -> Categorizer:
    """The linear classifier on the default embedding model (loaded and fitted once per process),
    or the cue words when that model cannot be loaded."""
    if not _DEFAULT:
        try:
            from deepresearch.config import EmbeddingConfig
            from deepresearch.models.embed import get_embedder

            categorizer = LinearCategorizer(get_embedder(EmbeddingConfig()))
            categorizer._fit()  # fail here (and fall back to cue words) if the model cannot embed
            _DEFAULT.append(categorizer)
        except (DeepResearchError, ImportError, OSError) as exc:
            log.info("categories from cue words (no embedding model: %s)", exc)
            _DEFAULT.append(RuleCategorizer())
    return _DEFAULT[0]
