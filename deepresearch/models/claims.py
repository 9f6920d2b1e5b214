"""Which source sentences are worth keeping as facts: whole, standalone claims.

A passage handed to extraction is often a corpus chunk: a window of words that starts and
ends mid-sentence. A fact stored from it must be a sentence taken whole from the document,
must stand alone (no reference to a sentence the reader will not see), and must be a claim
(not an opinion, a pointer, a question, a heading, a list or table cell, code or syntax).
Those other sentences stay searchable in the corpus; the knowledge base is for claims.

`passage_claims(text, title)` applies the rules in document order and returns the sentences
that pass, each as stored (a leading pronoun resolved to the passage's subject when that is
certain, a leading "Note that" or an additive connector dropped); `claim_problem` says why
one sentence fails. The rules, each with the case it handles:

- cut at the passage edge: a sentence must start like one (an upper-case letter, possibly
  after a quote or bracket, or CJK — not a lower-case word, a digit or punctuation; an
  identifier such as `sqlite3_open`, `sqlite-vec` or `iPhone` counts) and end like one
  (. ! ? or the CJK full stops, optionally followed by a closing quote or bracket, not after
  a lone initial or an abbreviation such as "vs." or "c."), with its brackets and
  quotes balanced. Without the neighbouring chunk nothing can be completed, so such a
  sentence is dropped, never capitalized or given a full stop (the old cleaner's
  "EXTRA synchronous is like FULL with the addition that." came from that); the first sentence of a
  passage of several that opens on a lower-case hyphenated word other than its title's ("held-out
  multi-hop questions its reading is …") is taken as cut (session 14);
- reference to what came before: a leading consequence or reference connector ("Hence",
  "In that case", "To avoid that", "Of course", "That means"), a demonstrative ("This",
  "These", "Such"), "the latter", "of these", "our …" or "these data/findings/results" →
  dropped; a leading personal pronoun ("He", "It", "They", "His", "Its", "Their") is replaced
  by the passage's subject only when the previous sentence is about it (it starts with that
  subject, or with a pronoun already resolved to it) and the subject is certain (the title,
  or the name that opens the passage's first sentence before its verb) and agrees in number
  ("They" only for a plural subject); otherwise dropped. "The film …" becomes the subject when
  the first sentence says the subject is a film. A pronoun inside the sentence ("Through his
  mother, he …") needs its antecedent written before it in the same sentence; a subject of
  "The" and common nouns only ("The default strategy is …", "The second form …") points to
  something named before → dropped;
- method statements of a study ("Cytokine levels were measured.", "We followed 522
  patients …", "The aim of this study was …", "Analysis of the … revealed …") and every sentence
  of a structured abstract's method section (after a METHODS/DESIGN/… heading, or before a
  chunk's first RESULTS heading) describe the source, not the world → dropped;
- a relation to something named before: "For example, …", "The sender gathers …", "the
  publication's …", "a similar range", "were then treated", "the few studies", "Notable
  speakers included …" → dropped;
- session 13, from the fresh and dev2 splits' failures: a leading possessive ("The project's name
  …"), a participant of an example ("the writer", "the server", "the answer"), its variables
  ("connection Y", "the X transaction"), "the above", "… steps 1-3 above.", "We call this …",
  "presented so far", a comparison without "than" ("Branch coverage is more strict."), "Nor …", a
  study's arms and samples ("in the placebo group", "In the nine source countries"), a work named
  before ("on the show", "the first series"), a pronoun subject of a leading clause ("Whether it
  is …"), a credit line without a verb ("Starring …") → dropped; in a window of words, a first
  sentence opening on a keyword ("TEMP database file is …") is taken as cut; a journal's title-case
  abstract headings ("Design, Setting, and Patients", "Results") open sections like capitals do;
  "And", "But" and "Note also that" are dropped, not the claim; "It is unclear whether …" and an
  antecedent in the sentence ("Because an SQLite database is …, it …") are not dangling pronouns;
  a subject that names itself ("The act of deleting a file …") is not a reference;
- session 13's second round, from blind2's failures: values whose owners were named before ("were
  8.5 and 26.3 cases …, respectively"), pointers inside a sentence ("(see …)", "enumerated below"),
  "we therefore …", an example's objects ("the original table", "the new row"), "the title game",
  "The cast also features …", a parenthesized note without a verb ("(Funded by …)"), capitals
  headings with commas ("DESIGN, SETTING, AND PARTICIPANTS"); statistics in brackets are not code;
- not a claim: questions, lines ending with ":" or ";" (lists, code), pointers ("See the …
  documentation for details", "for more information", "described below"), hedges and
  opinions ("Presumably …", "Yes, …", "I think …", first person singular), imperatives
  ("Use …", "Avoid …", also after a condition: "If …, then use …"; a base verb before its object:
  "Obtain an EXCLUSIVE lock …", "Flush all changes …"), objectives ("To compare …"), "As a …" list items,
  code or syntax (comments, braces, pipes, a C signature, a dense run of symbols), headings,
  table cells and phrases without a verb;
- session 22, from blind13's failures (the libffi manual): a noun phrase without a verb ("An unsigned,
  8-bit integer type.") is not a claim; after a term alone on its line ("ffi_type_uint8 ¶", a definition
  list's term) it is that term's description and becomes "ffi_type_uint8 is an unsigned, 8-bit integer type.".
- session 36, from the documentation misses and blind16's failures (Python's pages): any verb before a determiner
  opens an instruction or a subject-less description ("Adjust the maximum depth …", "Specifies the name of …"), a
  gerund's phrase without a verb and an entry's subject-less description ("finalize(): Return …") are not claims;
  the page's worked example, a version note ("Changed in version 3.3.1: …"), a pronoun after a fronted phrase ("In
  versions prior to 3.2.4 it …") and a sample's counts ("in 9 of 11 patients") do not stand alone; "it" is never a
  person, and another person's last name ("poet Kaifi Azmi") is not the subject's antecedent.

These rules are the first filter, not the last: with an embedding categorizer, extraction
(models/extract.py) passes the sentences they keep through a learned stands-alone check
(models/standalone.py, session 14), which drops kinds of dependence no rule names yet (a study's
steps: "Early passage cells (<20 passages) exhibited …", "Ten clonal lines were established from …").
New kinds of failure are to be met there, by labeled examples, rather than by a rule per case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from deepresearch.grounding import block_sentences, looks_like_claim
from deepresearch.text import SENTENCE_OPENER, STOPWORDS, YEAR, has_cjk, normalize_space

# --- whole sentences ----------------------------------------------------------------------

_OPENERS = "\"'“‘([«"
_CLOSERS = "\"'”’)]»"
_FINAL = re.compile(r"[.!?。！？][\"'”’)\]»]*$")
_IDENTIFIER = re.compile(r"^[a-z][a-z.]*(?:[A-Z_\d(]|-[a-z]+\b)")  # sqlite3_open, iPhone, x86, sqlite-vec
# A full stop after these is not a sentence end: the chunk (or the splitter) cut there.
_ABBREVIATION_END = re.compile(
    r"(?:^|[\s(\[\"'])(?:vs|ca|e\.g|i\.e|etc|al|fig|no|vol|pp|approx|cf|resp|Mr|Mrs|Ms|Dr|Prof|St|Jr|Sr|Inc|Ltd|Co)\.$"
)
_TRAILING_FUNCTION_WORD = re.compile(
    r"\b(?:the|a|an|of|to|that|and|or|with|by|for|in|on|at|from|versus|than|as|is|are|was|were|be|its|their)[.!?]$",
    re.IGNORECASE,
)
# "Elwyn Brooks "E. B. White" and "(c. 1020 – c. 1069)": the splitter cuts after initials.
# (an initial after a capitalized word, a quote, another initial or nothing; "c." for circa)
_ENDS_WITH_INITIAL = re.compile(
    r"(?:(?:^|[\s(\[\"'“])(?:c|ca|vol|no)|(?:^|[A-Z][\w'’\-]*\s+|[\"“(]|[A-Z]\.\s*)[A-Z])\.$"
)
# A name's first initial, cut: after "the" ("whose family owned the J."), after a maker's "by" ("produced by D.") or
# after a person's role ("by singer-songwriter M."). Not re-joined to the next sentence (join_initials): the letter
# may be a variable ("implemented by T.", "divided by N." end sentences, so a bare "by" is left out). Session 19:
# the labeled set's stored facts ending so were all such cuts.
_ENDS_ON_A_NAME_INITIAL = re.compile(
    r"(?:^|\s)(?:(?i:the)|(?:produced|written|co-written|founded|composed|directed|owned|published|created|designed|"
    r"developed|performed|sung|recorded|edited|illustrated|painted|invented|discovered|hosted|narrated|authored|"
    r"coached|led|played|voiced) by|(?:singer-songwriter|singer|songwriter|author|writer|director|producer|actor|"
    r"actress|artist|composer|novelist|poet|painter|architect|journalist|rapper|guitarist|politician))\s+[A-Z]\.$"
)


def starts_like_sentence(sentence: str) -> bool:
    """True when `sentence` begins as a sentence does (not in the middle of one)."""
    s = sentence.lstrip(_OPENERS + " ")
    if not s:
        return False
    first = s[0]
    if has_cjk(first) or first.isupper():
        return True
    return bool(_IDENTIFIER.match(s))


def ends_like_sentence(sentence: str) -> bool:
    """True when `sentence` ends with sentence-final punctuation that is not an abbreviation's
    or an initial's full stop, and does not end on a word no sentence ends with ("the.")."""
    s = sentence.rstrip()
    if not _FINAL.search(s):
        return False
    core = s.rstrip(_CLOSERS)
    return not (
        _ABBREVIATION_END.search(core)
        or _ENDS_WITH_INITIAL.search(core)
        or _ENDS_ON_A_NAME_INITIAL.search(core)
        or _TRAILING_FUNCTION_WORD.search(core)
    )


def balanced(sentence: str) -> bool:
    """Brackets and double quotes are closed (a cut sentence often leaves one open)."""
    if sentence.count("(") != sentence.count(")") or sentence.count("[") != sentence.count("]"):
        return False
    if sentence.count("“") != sentence.count("”"):
        return False
    return sentence.count('"') % 2 == 0


def is_whole(sentence: str) -> bool:
    """Starts and ends like a sentence, with balanced brackets and quotes."""
    return starts_like_sentence(sentence) and ends_like_sentence(sentence) and balanced(sentence)


# Words a sentence commonly opens with. In a window of words (a corpus chunk), a first sentence that opens
# instead with a word in capitals or an identifier — a keyword: "TEMP database file is …", "SQL and getting
# back …" — mostly starts mid-sentence: of the 780 chunk starts of 200 SQLite pages (cut by the corpus code,
# 180/30 words) that look like sentence starts, 463 open so and 86 % of those are cut mid-sentence; of the
# ~170 that open with one of these words ~92 % are true starts; of the ~145 that open with another capitalized
# word ("Alterations of …", "Edward Stafford …") about half are (a coin flip: kept). eval_extraction.py
# --chunk-edges; docs/BENCHMARKS.md, session 13.


# A first sentence opening on a lower-case hyphenated word ("held-out multi-hop questions its reading is …",
# "hypoxia-related endogenous proteins …"): an identifier such as "sqlite-vec" may open a sentence, but a
# chunk that opens so was mostly cut mid-sentence (blind4's and the README's cases), even when it ends whole.
_HYPHENATED_START = re.compile(r"^[a-z]+-[a-z]+\b")


def window_start_doubtful(sentences: list[str], title: str = "") -> bool:
    """The passage's first sentence probably starts mid-sentence: the passage is a window of words (its
    last sentence is cut) and the first sentence opens with a word in capitals or an identifier ("TEMP
    database file is …"), not as sentences commonly do nor with an abstract's section heading; or, in a
    passage of several sentences, it opens on a lower-case hyphenated word that is not the title's
    ("sqlite-vec is …" under "sqlite-vec" stays)."""
    if len(sentences) < 2:
        return False
    hyphenated = _HYPHENATED_START.match(sentences[0])
    if hyphenated is not None and hyphenated.group(0) not in title.lower():
        return True
    return not ends_like_sentence(sentences[-1]) and opens_on_a_keyword(sentences[0])


def opens_on_a_keyword(sentence: str) -> bool:
    """The sentence opens with a word in capitals or an identifier ("TEMP database file …", "sqlite3_open
    …"), not with a common sentence opener nor an abstract's section heading."""
    first = sentence.lstrip(_OPENERS + " ")
    word = first.split()[0] if first.split() else ""
    if SENTENCE_OPENER.match(first) or section_heading(first) or (word[:1].isupper() and not word.isupper()):
        return False
    return True


# "… founded by E. W. Scripps": an initial after any word, when the next piece opens with another one.
_LONE_INITIAL_END = re.compile(r"\s[A-Z]\.$")
_INITIAL_START = re.compile(r"^[A-Z]\.(?:\s|$)")


def join_initials(sentences: list[str]) -> list[str]:
    """Re-join sentences the splitter cut after an initial or "c." ("E. B. White", "(c. 1020",
    "founded by E. W. Scripps")."""
    out: list[str] = []
    for sentence in sentences:
        if out and (
            _ENDS_WITH_INITIAL.search(out[-1]) or (_LONE_INITIAL_END.search(out[-1]) and _INITIAL_START.match(sentence))
        ):
            out[-1] = f"{out[-1]} {sentence}"
        else:
            out.append(sentence)
    return out


# --- claims -------------------------------------------------------------------------------

_IMPERATIVE = (
    r"(?:Obtain|Write|Flush|Wait|Query|Change|Open|Close|Delete|Remove|Create|Drop|Check|Verify|Read|Compile|"
    r"Configure|Specify|Select|Insert|Update|Replace|Copy|Move|Start|Stop|Restart|Look|Keep|Give|Get|Put|Make|Take|"
    r"Send|Save|Load|Build|Define|Pass|Invoke|Execute|Apply|Enable|Disable|Modify|Rename|Store|Acquire|Release|"
    r"Lock|Unlock|Download|Upgrade|Increase|Decrease|Reduce|Limit|Allocate|Free|Return|Repeat|Continue|Begin|"
    r"Commit|Roll back|Sync|Truncate|Attach|Detach|Compute|Calculate|Measure|Find|Print|Edit|Mix|Add|Place|Combine|"
    r"Insert|Connect|Disconnect|Mount|Unmount|Register|Sign|Log|Follow|Read|Test|Invalidate|Clear|Reset|"
    r"Fetch|Parse|Provide|Include|Import|Export|Declare|Wrap|Split|Merge|Filter|Convert|Extract|Generate|Clone|"
    r"Upload|Submit|Fill)"
)
_OBJECT_START = (
    r"(?:a|an|the|all|any|each|every|this|that|these|those|it|them|your|its|their|some|one|two|three|"
    r"on|to|up|out|off|for|until|from|into|with|back|down)\b"
)
# Words that may open a sentence before a determiner without being its verb: function words, prepositions,
# conjunctions and adverbs ("During the war …", "Unlike the other …", "Once the lock is held …").
_OPENS_NOT_ON_A_VERB = STOPWORDS | frozenset(
    """during since because although though unlike like despite before after within through throughout between among
    amongst around across against along alongside behind beyond beneath beside besides below above inside outside near
    toward towards upon via per plus minus versus amid amidst onto off out up down unless until while whether whereas
    once whenever wherever whatever whoever however yet nor now still today thus hence therefore moreover furthermore
    meanwhile instead otherwise again even ever never already soon later earlier first second third last next every
    either neither another several half none twice often sometimes always together almost quite rather given except
    yesterday nowadays overall elsewhere afterwards afterward thereafter nevertheless nonetheless beforehand whilst
    altogether
    """.split()
)
_VERB_OPENING = re.compile(
    rf"^(?!(?i:{'|'.join(sorted(_OPENS_NOT_ON_A_VERB))})\b)[A-Z][a-z]+(?<!ing)(?<!ly)\s+"
    # not "which" nor "that", relative after a noun ("Modules which are not included …"), nor "no" ("Xcode no longer
    # …"), nor a number ("Disc one contains …", "Twenty three of 38 …"); not "Alexander the Great"
    r"(?:the|a|an|whether|what|how|all|any|each|every|its|their|your|his|her|some|this|these|those|"
    r"whichever|whatever|several|many|multiple)\b(?!\s+[A-Z])"
)
_NOT_A_CLAIM: list[tuple[str, re.Pattern[str]]] = [
    (
        "a pointer to other text",
        re.compile(
            r"^(?:see|refer to|for (?:more|further|additional|details|information|an? (?:example|overview|list))|"
            r"more (?:information|details))\b|\b(?:for (?:more |further |additional )?(?:details?|information)|"
            r"(?:is|are) (?:described|discussed|explained|shown|listed) (?:in|below|above|later|elsewhere)|"
            r"(?:see|shown|described|discussed) (?:above|below)|the following|as follows)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "a hedge or an opinion",
        re.compile(
            r"^(?i:(?:presumably|perhaps|maybe|probably|possibly|hopefully|yes|of course|obviously|clearly|"
            r"arguably|surely|certainly|frankly|honestly|in my (?:opinion|view|experience))\b|no,)|"
            r"\b(?:I|I'm|I've|I'd)\b|^My\b|\b(?:my|me)\b|\b(?i:we believe|we think|we feel|we hope|seems? to)\b"
        ),
    ),
    (
        "an instruction, not a claim",
        re.compile(
            # also the main clause of a condition: "If …, then use a client/server database engine.",
            # and after a purpose clause: "To get TSV quoted per RFC 4180 …, first enter ".mode csv", …"
            r"^(?:(?:if|when|unless|whenever|to)\b[^,]*,\s*(?:then\s+|first\s+|simply\s+|just\s+)?)?"
            r"(?:use|avoid|choose|consider|make sure|ensure|remember|try|do not|don't|never|always|please|"
            r"run|set|call|add|install|click|type|enter|let us|let's)\b(?!\s+of\b)",
            re.IGNORECASE,
        ),
    ),
    # Advice to the reader: "You may want to consider …", "Be careful not to …", "… it is recommended that all …".
    (
        "advice, not a claim",
        re.compile(
            r"^(?:be careful|be sure|be aware)\b|\byou (?:may|might) (?:want|wish) to\b"
            r"|\bit is recommended (?:that|to)\b",
            re.IGNORECASE,
        ),
    ),
    # A step of a procedure: "Obtain an EXCLUSIVE lock …", "Flush all changes to the disk.", "Query or change
    # the setting …" — a base-form verb followed by an object's determiner (not "Check constraints are …").
    (
        "an instruction, not a claim",
        re.compile(
            rf"^(?:for (?:each|every)\b[^,]*,\s*)?{_IMPERATIVE}(?:\s+(?:or|and)\s+{_IMPERATIVE})?\s+{_OBJECT_START}",
            re.IGNORECASE,
        ),
    ),
    # "To compare the effects of oral semaglutide with placebo …": an objective, not a finding
    ("an objective, not a claim", re.compile(r"^To [a-z]+\b(?!.*\b(?:is|are|was|were|has|have|had|can|will|must)\b)")),
    # "Listing 8-17 adds the letter l …", "An attempt might look something like Listing 20-5, which won't compile.":
    # a pointer to a listing, figure or table of the document (not one in brackets after a claim: "… ( Table 1).")
    (
        "a pointer to a listing, figure or table",
        # … not a name with a number ("Figure 8 is the fifth studio album …", "Table 19 is a 2017 film")
        re.compile(
            r"\b(?:Listing|Figure|Fig\.|Table)\s+\d+(?:[-.]\d+)*\b(?![^()]*\))"
            r"(?!\s+(?:[A-Z]|(?:is|was|are|were)\s+(?:an?|the)\b))"
        ),
    ),
    # A sentence that opens on a verb: an instruction ("Adjust the maximum depth …", "Trace execution of …") or a
    # description whose subject, an option or a function, is the page's heading ("Specifies the name of the directory
    # in which Apache can find meta information files."). A subject is never followed by a determiner, so a first
    # word that is none of the words above, nor a gerund ("Passing the struct …" is a subject) nor an adverb, is a
    # verb when one follows it.
    ("an instruction, or a description of something the page names elsewhere", _VERB_OPENING),
    # "Let X be the expression in the WHERE clause …": a variable defined for an argument, not a claim
    ("a definition for an argument, not a claim", re.compile(r"^Let\s+\S+\s+(?:and\s+\S+\s+)?be\b")),
    # "As a REAL value that is the fractional Julian day number.": a list item, not a sentence
    # ("As an optimization, SQLite can …" has its main clause after the comma).
    ("a list item, not a sentence", re.compile(r"^As (?:a|an)\s[^,;]*$")),
]
_CODE = re.compile(
    r"^(?:[A-Z]:\\>|\$|>>>)\s|"  # a console line: "C:\> …", "$ …", ">>> …"
    r"/\*|\*/|[{}]|\s--\s|\|\s*\w+\s*\||^\s*(?:int|void|char|const|static|struct|unsigned|double|float|"
    r"sqlite3_int64|sqlite3)\s+\*?\w+\s*\(|\w\s*\(\s*(?:const\s+)?\w+\s*\*|\b\w+\s*=\s*\w+\s*[|;,]",
    re.IGNORECASE,
)
_SYMBOLS = re.compile(r"[=<>|{}\[(;*/\\#$@~^`]")  # a bracket pair counts once: "(relative risk [RR] 3.5)"


_STATISTICS = re.compile(r"\((?=[^()]*\b(?:P|p|R2|OR|RR|HR|CI|SD|n)\s*[=<>])[^()]*\)")


def claim_problem(sentence: str) -> str | None:
    """Why a (whole) sentence is not a claim worth storing; None when it is one."""
    s = normalize_space(sentence)
    if s.endswith("?"):
        return "a question, not a claim"
    if s.endswith((":", ";")):
        return "introduces a list or is code"
    prose = _STATISTICS.sub("", s)  # "(R2 = 0.46, P < .001)" is a finding's statistics, not code
    if _CODE.search(s) or len(_SYMBOLS.findall(prose)) > max(3, len(prose) // 25):
        return "code or syntax"
    for reason, pattern in _NOT_A_CLAIM:
        if pattern.search(s.lstrip(_OPENERS)):  # "(See the … for details.)" too
            return reason
    if not has_cjk(s) and (len(s.split()) < 5 or not looks_like_claim(s)):
        return "a heading or a phrase, not a claim"
    if noun_phrase(s, participles=False):
        return "a noun phrase without a verb (a list item or a term's description), not a claim"
    if gerund_phrase(s):
        return "a gerund's phrase without a verb (a list item or a heading), not a claim"
    entry = _ENTRY_LABEL.match(s)
    description = s[entry.end() :] if entry else ""
    if description and (_VERB_OPENING.match(description) or _BARE_CONDITION.match(description)):
        return "an entry's description without its subject, not a claim"
    return None


# "Running the interpreter with -X no_debug_ranges.", "Using the --target flag to build for a specific platform.":
# a list item or a heading; a gerund that is the subject has a verb after it ("Passing the struct … is guaranteed
# …", "Implementing Drop lets …"). Prepositions that end in -ing open sentences with verbs ("During the offseason, …").
_GERUND_OPENING = re.compile(
    r"^(?!(?:During|Following|According|Including|Excluding|Regarding|Concerning|Considering|Notwithstanding|Pending|"
    r"Beginning|Starting|Depending)\b)[A-Z][a-z]+ing\b"
)


def gerund_phrase(sentence: str) -> bool:
    """A phrase that opens on a gerund and has no finite verb: no auxiliary, irregular past, "-s" or "-ed" word,
    and no comma ("Using a radioligand binding assay, we show that …" has its main clause after one)."""
    if not _GERUND_OPENING.match(sentence) or "," in sentence or _FINITE.search(sentence):
        return False
    words = [w.strip(";:'\"“”‘’()") for w in sentence.rstrip(".!").split()[1:]]
    verbs = [w for w in words if w.isalpha() and w.islower()]
    finite = (w in _IRREGULAR_PAST or w.endswith("ed") or _present_tense(w) for w in verbs)
    return not _MORE_FINITE.search(sentence) and not any(finite)


# An entry of a reference's list, its name then its description: "finalize(): Return the final result …",
# "NotSupportedError – If used with a version of SQLite older than 3.25.0, …". The description has no subject when
# it opens on a verb or is a condition without a subject ("If used with …", "When called …").
_ENTRY_LABEL = re.compile(r"^(?:[\w.]+\(\)\s*:|[\w.()]+\s+[–—]|[\w.]+\(\)\s+[–—])\s+")
_BARE_CONDITION = re.compile(r"^(?:If|When|Unless|Once|While|Until|Whenever)\s+(?:[a-z]+ly\s+)?[a-z]+(?:ed|en)\b")


# --- noun phrases without a verb: "An unsigned, 8-bit integer type." ------------------------

# beside the auxiliaries of `_FINITE` (the participle rule's, below)
_MORE_FINITE = re.compile(r"\b(?:be|been|cannot)\b|n't\b", re.IGNORECASE)
_IRREGULAR_PAST = frozenset(
    "began became bought brought built came caught felt fell found fought gave got grew held kept knew led left lost "
    "made meant met paid ran rose said saw sent sold spent stood taught thought told took understood went won "
    "wrote".split()
)
_CLOSED_WORDS = (
    "the a an this that these those its their his her our my your it them him with while out due to in on at for "
    "from into onto after before during because when if as and or but up down off over under through than so"
)
# after an "-ed" word, a lower-case word that may be a noun: not a closed-class word, an "-ing" or an "-ly" word
_NOUN_AFTER_PARTICIPLE = re.compile(rf"^(?!(?:{'|'.join(_CLOSED_WORDS.split())})$)[a-z]+(?<!ing)(?<!ly)$")


def _present_tense(word: str) -> bool:
    """A lower-case "-s" word that may be a present tense ("flows", not "class", "status", "analysis")."""
    return word.endswith("s") and not word.endswith(("ss", "us", "is"))


def noun_phrase(sentence: str, participles: bool) -> bool:
    """An article, then at most 14 words and no verb: "An unsigned, 8-bit integer type.", "The C int type."
    No auxiliary, no irregular past, no "-s" word after the head noun (it could be a present tense), and an
    "-ed" word after the head noun is a past tense ("The series premiered on …", "An error occurred while …"),
    unless `participles` (something else says it is a noun phrase: a term line before it) and "by" or a noun
    follows ("The executable address returned by …", "The C unsigned char type.")."""
    text = _PARENTHETICAL.sub("", sentence).strip().rstrip(".!").strip()
    raw = text.split()
    words = [w.strip(",;'\"“”‘’") for w in raw]
    if not 2 <= len(words) <= 15 or words[0] not in ("A", "An", "The"):
        return False
    if _FINITE.search(text) or _MORE_FINITE.search(text):
        return False
    for index, word in enumerate(words[1:], 1):
        if not word.isalpha() or not word.islower():
            continue
        after = words[index + 1] if index + 1 < len(words) else ""
        if word in _IRREGULAR_PAST or (index > 1 and _present_tense(word)):
            return False
        # right after the article ("An unsigned …", "The proposed …") or before a comma, "-ed" is adjectival;
        # after a term line also before "by" (a passive: "The executable address returned by …") or before a
        # noun ("The C unsigned char type."), not before an object, a preposition or a particle ("The call
        # cleared the …", "An error occurred while …", "The session closed with …", "A handshake timed out.")
        if word.endswith("ed") and index > 1 and not raw[index].endswith(","):
            if not participles or not (after == "by" or _NOUN_AFTER_PARTICIPLE.match(after)):
                return False
    return True


# A term alone on its line, then its description ("ffi_type_uint8 ¶" / "An unsigned, 8-bit integer type."):
# an identifier (an underscore, a digit, brackets, a dot, "::" or an inner capital), up to four words, no
# sentence end; a documentation generator's anchor mark ("¶", "#") after it.
_TERM_LINE = re.compile(
    r"^(?![vV]?\d+(?:\.\d+)*\.?(?:\s|$))"  # not a section number nor a version ("2.3.1 Primitive Types", "v6.0.0")
    r"(?P<term>[^\s.!?¶#]*(?:[_\d()\[\]]|::|\w\.\w|[a-z][A-Z])[^\s!?¶#]*(?: [^\s.!?¶#]+){0,3})\s*[¶#]?$"
)


def described_term(previous: str, sentence: str) -> str | None:
    """`sentence` as a claim about the term on the line before it ("ffi_type_uint8 is an unsigned, 8-bit
    integer type."), when that line is a term alone and `sentence` a noun phrase describing it; else None."""
    match = _TERM_LINE.match(normalize_space(previous))
    if not match or not noun_phrase(sentence, participles=True):
        return None
    article, rest = sentence.split(" ", 1)
    return f"{match.group('term')} is {article.lower()} {rest}"


# --- standing alone -----------------------------------------------------------------------

# A structured abstract's section heading at the start of a sentence: "RESULTS", "METHODS AND
# FINDINGS", "Conclusions:" (in SciFact's 5,183 abstracts the capitals form is ~15× the other).
_SECTION_WORD = (
    r"(?:BACKGROUND|OBJECTIVES?|AIMS?|PURPOSE|CONTEXT|INTRODUCTION|IMPORTANCE|RATIONALE|SUMMARY|METHODS?|"
    r"DESIGN|SETTINGS?|PARTICIPANTS|PATIENTS|SUBJECTS|MATERIALS|DATA|SOURCES|STUDY|SELECTION|EXTRACTION|"
    r"INTERVENTIONS?|MAIN|OUTCOMES?|MEASURES?|RESULTS?|FINDINGS|CONCLUSIONS?|INTERPRETATION|RELEVANCE|AND)"
)
_SECTION = re.compile(
    rf"^(?:({_SECTION_WORD}(?:,?\s+{_SECTION_WORD}){{0,4}}):?\s+(?=[A-Z\d])|"
    r"(Background|Objectives?|Aims?|Purpose|Context|Introduction|Methods?|Design|Study design|Setting|"
    r"Participants|Patients|Data sources|Study selection|Interventions?|Results?|Findings|Conclusions?|"
    r"Interpretation):\s+|"
    # a journal's title-case headings without a colon, before a capitalized word or a number
    r"(Importance|Objectives?|Design,? Setting,? and (?:Patients|Participants)|Design and Setting|"
    r"Setting and Participants|Interventions?|Exposures?|Main Outcomes? and Measures?|Results|"
    r"Conclusions and Relevance|Evidence Review)\s+(?=[A-Z\d]))"
)
# Sections whose sentences describe the study (its sample, measures and procedure), not the world.
_METHOD_SECTION = re.compile(
    r"(?:[A-Z ]+ AND )?METHODS?(?: AND [A-Z ]+)?|(?:STUDY )?DESIGN(?:[, ]+[A-Z ,]+)?|SETTINGS?(?: AND [A-Z]+)?|"
    r"PARTICIPANTS|PATIENTS|SUBJECTS|INTERVENTIONS?|EXPOSURES?|DATA SOURCES|STUDY SELECTION|DATA EXTRACTION|"
    r"MAIN OUTCOMES?(?: AND)? MEASURES?"
)
_RESULT_SECTION = re.compile(r"RESULTS?|FINDINGS")


def section_heading(sentence: str) -> str | None:
    """The structured-abstract heading a sentence opens with ("METHODS AND FINDINGS"), in capitals."""
    match = _SECTION.match(sentence)
    return (match.group(1) or match.group(2) or match.group(3)).upper() if match else None


def method_sections(sentences: list[str]) -> list[bool]:
    """Per sentence, whether it lies in a method section of a structured abstract: after a method
    heading, or — in a chunk that starts mid-abstract — before a first heading that is RESULTS."""
    headings = [section_heading(s) for s in sentences]
    first = next((h for h in headings if h), None)
    current = "METHODS" if first and _RESULT_SECTION.fullmatch(first) else None
    out = []
    for heading in headings:
        current = heading or current
        out.append(bool(current and _METHOD_SECTION.fullmatch(current)))
    return out


_STRIP_PREFIX = re.compile(
    r"^(?:(?i:note (?:also )?that\s+|(?:and|but),?\s+(?=[A-Za-z])"
    r"(?!(?i:also|then|so|thus|even|on the other|in (?:that|this)|for (?:this|that)|if so|not)\b)|"
    r"(?:however|moreover|furthermore|in addition|additionally|"
    r"also|notably|indeed|importantly|interestingly|in particular|in general|today|currently),\s+))",
)
_REFERS_BACK = re.compile(
    r"^(?:this|these|those|that|such|both|here|the latter|the former|the other|another|hence|thus|therefore|"
    r"consequently|accordingly|then|so|and|but|or|yet|still|instead|otherwise|likewise|similarly|"
    r"even so|as a result|as such|in that case|in this case|in either case|in both cases|in such cases|"
    r"to avoid (?:that|this)|to do (?:that|this|so)|for this reason|for that reason|because of (?:this|that)|"
    r"of these|of those|of them|after that|afterwards|later|in turn|together with|on the other hand|"
    r"in contrast|by contrast|nevertheless|nonetheless|meanwhile|again|above all|for example|for instance|nor|"
    r"e\.g\.|in this example|in the example)\b",
    re.IGNORECASE,
)
# "While that is mostly true, …", "If it does, …", "When this option is in effect, …", "To install it you …": the
# opening clause's subject (or object) is something the source named before (group 1: the clause's subject).
_CLAUSE_REFERS_BACK = re.compile(
    r"^(?:(?:while|although|though|if|when|whenever|since|because|once|unless|whereas|even though|even if|as long as)"
    r"\s+(this|that|these|those|such|they|it)|to [a-z]+ (?:it|them|this|these|those))\b",
    re.IGNORECASE,
)
# What a study's sample is made of: "the 60 patients", "in 9 of 11 patients", "25 out of 7,781 cases".
_SAMPLE = (
    r"(?:patients|participants|subjects|studies|trials|countries|cases|controls|individuals|women|men|children|"
    r"families|infants|adults|mice|rats|samples|tumou?rs|sites|hospitals|centers|centres|cohorts|arms|groups|doctors|"
    r"respondents|volunteers)"
)
_REFERS_BACK_INSIDE = re.compile(
    r"\b(?:(?:this|these|those|such) (?:study|studies|data|findings|results|analysis|analyses|review|trial|"
    r"trials|approach|method|methods|effect|effects|association|problem|problems|case|cases|factors|changes|"
    r"patients|samples|cells|mice|genes|regions|values|models|steps|settings|rules|pragmas?|options?)|"
    r"our|the (?:latter|former)|the data|the study|both times|a second time|(?:see|shown|mentioned) (?:above|below)|"
    # a study's own sample: "in 97.5% of the sample", "the participants' intake"
    r"the (?:sample|cohort|participants|subjects|respondents))\b|"
    # "Any other kind of PRIMARY KEYs …": other than the one named before
    r"^any other\b|"
    # "… required by the rules enumerated below (see section "Schema Level Locking")."
    r"\((?:see|cf\.?)\s|\b(?:enumerated|listed|given|described|defined|explained|discussed|noted) (?:below|above)\b|"
    # a consequence of what came before: "we therefore limit the number of terms"
    r"\b(?:we|it|this|they|is|are|was|were|can|will|must|should) (?:therefore|thus|hence|consequently)\b|"
    # something of an example named before: "the original table", "the new row"
    r"\bthe (?:original|new|old|earlier|above) (?-i:[a-z])|"
    r"\b(?:these|those|this)\s+(?-i:[a-z])|\b(?-i:us)\b|"
    # "the publication's first editor", "a similar range" (similar to what?), "were then treated"
    r"\b(?-i:the [a-z]+['’]s)\s|\ba similar \w+\b(?!\s+to\b)|\b(?:is|are|was|were|had|has|have) then\b|"
    # "the few studies", "the remaining patients": a subset of something named before
    r"\bthe (?:few|remaining|aforementioned|above-mentioned|included|selected|enrolled) (?-i:[a-z])|"
    # "SQLite accepts both of the above.", "… using the algorithm of steps 1-3 above."
    r"\bthe above\b|\b(?:above|below)[.)]*$|"
    # a variable of an earlier example: "on a different database connection Y", "until the X transaction commits"
    r"\b(?:the\s+(?:[a-z]+\s+){0,2}|(?:in|on|from|to|by|with|until)\s+)(?-i:[BD-HJ-Z])\b(?![.'’\-&])|"
    # a comparison with something named before: "Branch coverage is more strict.", "… requires more seeking."
    r"\b(?:more|less|fewer) [a-z]+[.!]$|"
    # a study's arms and samples: "in the placebo group", "across treatment groups", "in either group",
    # "In the nine source countries …", "Of the 60 patients enrolled …"
    r"\b(?:the (?:[a-z\-]+ ){1,3}groups?|(?:treatment|study|control|intervention) groups|"
    r"(?:either|both|each) (?:group|arm)s?)\b|"
    # (a number in words is lower-case: "the Five Families" of New York is a name)
    rf"\bthe (?-i:two|three|four|five|six|seven|eight|nine|ten|\d{{1,3}}(?:,\d{{3}})*) (?:[a-z\-]+ )?{_SAMPLE}\b|"
    # a study's sample at its start: "the average baseline BMI was 23.2", "At baseline, the median … count was …"
    r"\bat baseline\b|\bbaseline (?-i:[a-z]+) (?:was|were)\b|"
    r"\bthe (?:average|mean|median) (?:baseline )?(?:[\w\-+]+ ){0,3}(?:was|were)\b|"
    # the same as something named before: "Constraints such as NOT NULL … are also ignored." (also as what?)
    r"\b(?:is|are|was|were|be|been) also (?-i:[a-z]+)(?:ed|en)[.!]?$|"
    # a work or event named before: "appears live on the show", "presented the first series"
    r"\bthe (?:(?:first|second|third|last|final|next|previous|original|title|main) )?(?:show|film|movie|album|song|"
    r"single|game|novel|book|series|tournament|competition|magazine|programme|program|band)\b"
    r"(?!\s+(?:premiere|finale|of)\b|\s*[\"“]|\s+(?-i:[A-Z]))|"
    # a participant of an earlier example: "the writer will not commit right away", "If the answer is "yes" …"
    r"\bthe (?:writer|reader|server|client|sender|receiver|caller|callee|answer)\b(?!\s+(?:operating|side)\b)|"
    # a demonstrative standing for what came before: "An example of that is UnsafeCell …", "… worry about this."
    r"\b(?:of|to|with|from|on|for|about|than|after|before|without|beyond|besides|despite) (?:this|that|these|those)"
    r"(?=\s+(?:is|are|was|were|has|have|had|can|could|will|would|may|might|must|does|do|did)\b|\s*[.,;!?)])|"
    # "We call this …", "the examples presented so far"
    r"\bcall (?:this|that|these|those|it|them)\b|"
    r"\b(?:presented|shown|described|discussed|seen|given|mentioned|listed) (?:so far|earlier|previously)\b|"
    # a worked example of the page: "In the preceding example, …", "As an example, let's study …"
    r"\b(?:in|from|of|as in|like) (?:the|this|that|these) (?:(?:first|second|third|last|final|preceding|previous|"
    r"earlier|following|next|above|below|same|former|latter|other) )?(?:examples?|listings?|snippets?)\b|"
    r"^as an example\b|\bthe (?:example|code|listing|snippet)s? (?:above|below)\b|"
    # a pronoun as the subject of a leading subordinate clause: "Whether it is associated with …"
    r"^(?:whether|if|when|whenever|because|although|though|while|since|once|unless|until|after|before)\s+"
    r"(?:it|its|they|their|he|his|she|her|them)\b|"
    # a note on the page's entry: "Changed in version 3.3.1: bufsize now defaults to -1 …", "New in version 3.11."
    r"^(?:new|changed|deprecated|added|removed) (?:in|since) version \d|"
    # a study's sample in numbers: "… were present in 25 out of 7,781 cases versus 1 out of 5,861 controls"
    rf"\b\d[\d,]* (?:out )?of (?:the )?[\d,]+ (?:[a-z\-]+ )?{_SAMPLE}\b|"
    # a fronted phrase, then a pronoun as the subject: "In versions prior to Python 3.2.4 and 3.3.1 it incorrectly
    # defaulted to 0 …", "From 2009 to 2012 he served as …" (not "In and of itself it is impossible to …"; not after
    # something the phrase names: "In order for a client application to access a database it connects …")
    r"^(?:in|on|at|for|from|with|since|before|after|until|during|prior to|under|without|unlike|despite|through|"
    r"throughout|within|by)(?:\s+(?!(?:a|an)\b)[^\s,;]+){1,8}?\s+(?-i:it|they|he|she)\s+(?:[a-z]+ly\s+)?"
    r"(?:(?!(?:is|was|has|does)\b)[a-z]+(?:ed|s)|(?:is|was|are|were)\s+(?:[a-z]+ly\s+)?[a-z]+ed)\b|"
    # a participle clause, then a pronoun as the main clause's subject: "After entering Sudan at the tripoint it
    # joins …" (the clause has no subject of its own, so the pronoun's is in another sentence)
    r"^(?:after|before|when|while|since|upon|on|by|through|without)\s+[a-z]+ing\b[^.;]*?[\s,]"
    r"(?:it|he|she|they)\s+(?-i:[a-z])",
    re.IGNORECASE,
)
# A time counted from when the source was written: "… started his career as an explorer 28 years ago.", "… has
# been a towering personality … for over forty years.", "last year", "over the past decade".
_COUNT = r"(?:\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|"
_COUNT += r"several|many|a few|some)"
_RELATIVE_TIME = re.compile(
    rf"\b{_COUNT}(?:\s+(?:more|full))?\s+(?:years?|months?|weeks?|days?|decades?|centuries|century)\s+ago\b|"
    rf"\b(?:has|have)\s+(?:been|[a-z]+ed)\b[^.;]*\bfor\s+(?:(?:over|more than|nearly|almost|about)\s+)?{_COUNT}\s+"
    r"(?:years|decades)\b|\b(?:last|this|next) (?:year|month|week|decade)\b|"
    r"\bthe (?:past|last) (?:\w+ )?(?:years|decades|months)\b",
    re.IGNORECASE,
)
# A time counted from an event the source told before: "Only months later, France faced …", "Harbi was killed in a
# plane crash two years later.", "The same year, …", "Subsequently, …" — unless a year in the sentence anchors it
# ("Ten years later, in 1498, …", "Louis V (c. 966 – 21 May 987) … until his death a year later"), or it points forward
# ("the same day as the election").
_TIME_FROM_EVENT = re.compile(
    rf"\b(?:(?:only|just|exactly|barely|less than|more than|about|nearly|almost)\s+)?(?:{_COUNT}\s+)?"
    r"(?:years?|months?|weeks?|days?|decades?)\s+(?:later|earlier|afterwards?|thereafter)\b|"
    r"\b(?:the|that) (?:following|next|same|previous|preceding) (?:year|month|season|week|decade|day)\b(?! as\b)|"
    r"\b(?:later|earlier) (?:that|the same|in the) (?:year|month|season|decade)\b|"
    r"^(?:(?:shortly|soon|not long) )?(?:after(?:wards?)?|thereafter|afterwards?|later|subsequently),",
    re.IGNORECASE,
)
# a year that anchors it: "in 1498", "c. 966", "987 AD"
_ANCHOR_YEAR = re.compile(rf"{YEAR.pattern}|\bc\.\s*[0-9]{{3,4}}\b|\b[0-9]{{3,4}}\s*(?:AD|BC|BCE|CE)\b")


def _time_from_event(sentence: str) -> bool:
    """A time counted from an event told before (`_TIME_FROM_EVENT`) with no year in the sentence to anchor it."""
    return _TIME_FROM_EVENT.search(sentence) is not None and not _ANCHOR_YEAR.search(sentence)


# An empty pair of quotes: the name that stood there was lost ("An expansion pack called "" was released …").
_EMPTY_QUOTES = re.compile(r"\"\s*\"|“\s*”|‘\s*’")
# A possessive inside the subject with nothing before it to point to: "The westernmost areas of its metro area is …"
# (not one that points forward: "The second largest city in its state, Dayton is …")
_SUBJECT_POSSESSIVE = re.compile(
    r"^(?:The|A|An)\s+(?:[a-z\-]+\s+){0,3}(?:of|in|on|for|from|with)\s+(?:its|their)\b(?![^,]*,\s+[A-Z])"
)
# A variable of a worked example: a letter and a digit ("The string s3 will contain …", "ownership of v1"); not a
# unit (kg/m2, 25 cm2), a code after a name or a colon (APOE e4, Core i7, Google's v8, node:v8), nor vitamin b6.
_EXAMPLE_VARIABLE = re.compile(r"(?<![\w\-./:])[a-z]\d(?![\w\-.])")
_CODE_OWNER = re.compile(r"(?:[A-Z]\w{1,6}|vitamin|'s) $")  # the word before a code, not a variable


def _has_example_variable(sentence: str) -> bool:
    """A letter and a digit standing alone that no name, "vitamin" or possessive owns."""
    return any(not _CODE_OWNER.search(sentence[: m.start()]) for m in _EXAMPLE_VARIABLE.finditer(sentence))


# … or a capital letter after "a"/"an" ("If the right operand is an integer value N, then …"), as after "the" above
# (then a clause or a stop: "a T cell", "a G protein", "a vitamin D level" name things)
_ARTICLE_VARIABLE = re.compile(
    r"\b(?i:an?)\s+(?:[a-z]+\s+){0,2}[BD-HJ-Z]\b(?![.'’\-&])"
    r"(?=\s*(?:,\s*(?:then|so|which|where)\b|[;:)]|$)|\s+(?:is|are|was|were|be|then)\b)"  # not "a hepatitis B, C …"
)
# "also" in a condition: something else failed or happened before ("An error is only reported if xRead() also fails.")
_ALSO_IN_CONDITION = re.compile(
    r"\b(?:if|when|unless|until)\s+(?:\S+\s+){1,3}also\s+(?!(?:is|was|has|does|its|this)\b)(?-i:[a-z]+s)\b",
    re.IGNORECASE,
)  # a verb, not "also was high", "also has a lib.rs"
# A personal pronoun inside the sentence, or a main clause opening with one after a phrase.
_INNER_PRONOUN = re.compile(r"\b(?:he|she|him|his|her|they|them|their)\b|,\s+(?:it|its)\s", re.IGNORECASE)
# "Because an SQLite database is a single file, it is often used …": the antecedent opens the sentence.
_CLAUSE_ANTECEDENT = re.compile(
    r"^(?:Because|Since|When|Whenever|If|Although|Though|While|As|Once|Unless|After|Before) (?:a|an) [^,]+,\s+"
    r"(?:it|its|they|their)\s"
)
_NAME_RUN = re.compile(r"\b[A-Z][\w'’\-]+(?:\s+(?:[A-Z][\w'’\-]+|of|de|van|von|ap|the))*\s+[A-Z][\w'’\-]+")
_METHOD = re.compile(
    r"\bwe (?:report|describe|present|introduce|provide) (?:a|an|the|here)\b|"
    r"^(?:analys[ie]s|comparison|examination|evaluation|assessment|integration|sequencing) of (?:the|these|our)\b|"
    r"^(?:we (?:aimed|conducted|followed|performed|used|studied|recruited|enrolled|analy[sz]ed|examined|measured|"
    r"collected|compared|investigated|reviewed|searched|assessed|evaluated|included|designed|developed|"
    r"sought|set out)|the (?:aim|objective|purpose|goal)s? of)\b|"
    r"\b(?:was|were) (?:measured|detected|evaluated|assessed|examined|analy[sz]ed|studied|recorded|collected|"
    r"obtained|cultured|treated|induced|used to|applied to|randomi[sz]ed|enrolled|recruited|followed|"
    r"investigated|explored|reviewed|performed|conducted)\b",
    re.IGNORECASE,
)
# What a model-written fact may not start with (it cannot be resolved against the source).
PRONOUN_START = re.compile(
    r"^(he|she|it|its|they|them|their|his|her|this|these|those|that|such|both|which|who|here|"
    r"the latter|the former|the other|another|also|as a result|in turn|in it|in this|in these|at the time|"
    r"afterwards|later|then|there he|there she)\b",
    re.IGNORECASE,
)
_MARKUP = re.compile(r"^\s*(?:[#>*\-+•]+|\d+[.)])\s+")
_PRONOUN = re.compile(r"^(he|she|it|they|his|her|its|their)\b\s*", re.IGNORECASE)
_POSSESSIVE = {"his", "her", "its", "their"}
_PERSONAL = {"he", "she", "his", "her"}  # a pronoun chain through these is about a person
# "It is unclear whether …", "It is known that …": "it" points forward to its clause, not back.
_EXPLETIVE_IT = re.compile(
    r"^It (?:is|was|has been|remains|seems|appears) (?:not |now |still |also |widely |generally )?"
    r"(?:unclear|clear|known|unknown|possible|impossible|likely|unlikely|important|necessary|difficult|easy|"
    r"uncertain|thought|believed|estimated|reported|recommended|assumed|expected|evident|true|false)\b"
    r"(?:\s+\w+)?\s+(?:whether|that|to|if|how|why|when|what)\b"
)
# Each word of the name is taken whole (the lookahead): a word split in two let "This is …" read as the name "Th"
# before the verb "is", and let an all-capitals heading ("ENVIRONMENT AND CONFIGURATION VARIABLES ----- …") be split
# every way there is, which took minutes a sentence (the Git documentation, session 33).
_SUBJECT_VERB = re.compile(
    r"^((?:[A-Z\"“][\w'’.\-\"”]*(?![\w'’.\-\"”])\s?)+?)\s*(?:\([^()]*\)\s*|,[^,]*,\s*|\{[^{}]*\}\s*)?"
    r"(?:is|was|are|were|has|had|have|became|remains)\b"
)


def leading_subject(sentence: str) -> str | None:
    """The name a sentence opens with, before its verb ("Scott Andrew Buchholz (born …) is …")."""
    match = _SUBJECT_VERB.match(sentence)
    if not match:
        return None
    name = match.group(1).strip().strip('"“”').strip()  # '" " is …' (a blanked title) names nothing
    return name if name and len(name.split()) <= 8 else None


def passage_subject(sentences: list[str], title: str = "") -> str | None:
    """The passage's subject when it is certain: the title when the first sentence opens with
    (the words of) it, else the name the first sentence opens with before its verb."""
    if not sentences:
        return None
    first = sentences[0]
    name = leading_subject(first)
    clean_title = re.sub(r"\s*\([^()]*\)$", "", title).strip()  # "Always (2011 film)" → "Always"
    # '"Too Good to Last" is a song …': the title, quoted or not, then its verb
    if clean_title and re.match(rf"^[\"“]?{re.escape(clean_title)}[\"”]?,?\s+(?:is|was|are|were)\b", first):
        return clean_title
    if clean_title and name:
        title_words = set(clean_title.lower().split())
        if title_words <= set(name.lower().replace('"', " ").split()):
            return clean_title
    return name


def inner_pronoun_problem(sentence: str, subject: str | None) -> str | None:
    """A pronoun inside the sentence with nothing in it to point to: its antecedent must be
    written before it — the passage's subject (or its last name), else some full name (a person's:
    not for "it", as in "Starring So Ji-sub and Han Hyo-joo, it is about …")."""
    match = _INNER_PRONOUN.search(sentence)
    if not match:
        return None
    before = sentence[: match.start()]
    if subject and _names_subject(before, subject):
        return None
    if _CLAUSE_ANTECEDENT.match(sentence) and match.start() >= sentence.index(","):
        return None
    # "The json_insert() … functions all take a single JSON value as their first argument": its own subject
    if match.group(0).strip().lower() in ("its", "their") and re.match(r"^The\s+\S", sentence):
        return None
    if not subject and _NAME_RUN.search(before) and "it" not in match.group(0).lower().split():
        return None
    return "a pronoun with nothing in the sentence to point to"


def _names_subject(before: str, subject: str) -> bool:
    """`before` names the subject in full or by its last name alone, not as another person's last name ("The
    daughter of poet Kaifi Azmi and stage actress Shaukat Azmi, she …" is not about Kaifi Azmi but Shabana Azmi)."""
    if subject in before:
        return True
    words, own = before.split(), subject.split()
    for index, word in enumerate(words):
        if word != own[-1]:
            continue
        # the run of capitalized words the last name ends ("Sandra Miju Oh" names "Sandra Oh"), up to a comma
        start = index
        while start and words[start - 1][:1].isupper() and words[start - 1][-1].isalnum():
            start -= 1
        if start in (0, index) or set(words[start:index]) & set(own):  # or it opens the sentence: "The Cowboys"
            return True
    return False


_VERB_NEXT = re.compile(
    r"(?:[a-z]+ly\s+)?(?:[a-z]+(?:ed|s)|is|are|was|were|has|had|have|will|would|can|could|may|might|went|became|won|made|led|"
    r"took|began|held|grew|sold|rose|fell|left|ran|got|gave|came|met|wrote|found|kept|brought|also)\b"
)


def _head_noun_subject(sentence: str, first: str, subject: str | None) -> str:
    """ "The film …" → "<subject> …" when the first sentence says the subject is a … film."""
    match = re.match(r"^The ([a-z]+)\b\s*", sentence)
    if not (match and subject and _VERB_NEXT.match(sentence[match.end() :])):
        return sentence
    predicate = re.search(r"\b(?:is|was|are|were) (?:a|an|the)\b((?:\s+\S+){1,10})", first)
    if predicate and re.search(rf"\b{match.group(1)}\b", predicate.group(1)):
        return f"{subject} {sentence[match.end() :]}"
    return sentence


# "Notable speakers included …", "Former members include …": members of what the source is about.
_MEMBERS_OF = re.compile(
    r"^(?:Notable|Famous|Prominent|Other|Former|Past|Current|Key|Major|Previous|Early|Recent)\s+[a-z]+s\s+"
    r"(?:include|included|includes|were|are)\b"
)
_VERB_WORD = re.compile(
    r"^(?:is|are|was|were|will|would|can|could|must|may|might|should|shall|has|have|had|does|do|did|"
    r"includes?|included|contains?|contained|shows?|showed|becomes?|became|remains?|returns?|changes?|"
    r"[a-z]{3,}ed)$"  # a past tense: "The initial search yielded …"
)
_PARENTHETICAL = re.compile(r"\s*\([^()]*\)")
# "The project's name comes from …": whose project?
_LEADING_POSSESSIVE = re.compile(r"^The (?:[a-z]+ )?[a-z]+['’]s\s")
# "The sender gathers …": a present tense right after a one-word singular subject.
_PRESENT_AFTER_NOUN = re.compile(
    r"^The [a-z]+(?<!s) (?:(?:also|often|usually|still|now|then|only|always|never) )?[a-z]{2,}(?<![su]s)s\b"
)


_POST_MODIFIER = {"of", "associated", "created", "necessary", "needed", "required", "used", "produced", "caused"}
_PREPOSITIONS = {"in", "on", "at", "for", "from", "with", "by", "to", "that", "which"}
# "The second family of transcripts …", "The same value of …": relative to something named before.
_RELATIONAL = re.compile(
    r"\b(?:first|second|third|last|other|same|latter|former|next|previous|following|remaining|new|original|above)\b"
)


def definite_reference(sentence: str) -> bool:
    """A subject like "The default strategy …", "The second form …" or "The sender gathers …":
    "The" and common nouns only up to the verb — something the source named before (a name in
    the subject makes it definite)."""
    sentence = _PARENTHETICAL.sub("", sentence)  # "The first (query) form will return …"
    words = sentence.split()
    if not words or words[0] != "The" or len(words) < 3 or not words[1][:1].islower():
        return False
    if _LEADING_POSSESSIVE.match(sentence):
        return True
    # "The sender gathers …" (not "The temporary files associated with …": a plural noun, then its modifier)
    if _PRESENT_AFTER_NOUN.match(sentence) and (len(words) < 4 or words[3] not in _POST_MODIFIER | _PREPOSITIONS):
        return True
    for position, word in enumerate(words[1:7]):
        # "The act of deleting a file is …", "The tables necessary to do …": the subject says what it is
        if word in _POST_MODIFIER and not _RELATIONAL.search(" ".join(words[1:7])):
            return False
        if position and _VERB_WORD.match(word):  # not "The declared type …"
            following = words[position + 2] if position + 2 < len(words) else ""
            return not (word.endswith("ed") and following in ("by", "in", "with", "from"))
        if not word[:1].islower() or not word.isalpha():
            return False
    return False


# "Starring Rajendra Prasad, Maheswari in the lead roles and music composed by M. M. Srilekha.": a phrase
# opening with a participle has no main clause unless a finite verb or ", <subject> <verb>s/-ed" follows.
_PARTICIPLE_OPENER = re.compile(
    r"^(?:Starring|Co-starring|Featuring|Including|Excluding|[A-Z][a-z]+(?:ed|en) by|Along with|Together with|"
    r"Funded by|Supported by)\b"
)
_FINITE = re.compile(
    r"\b(?:is|are|was|were|has|have|had|does|do|did|can|could|will|would|may|might|must|shall|should)\b"
)
_MAIN_CLAUSE = re.compile(r",\s+(?:the|a|an|it|he|she|they|this|[A-Z][\w'’\-]*)\s+(?:[a-z]+\s+)?[a-z]+(?:s|ed)\b")


def verbless_fragment(sentence: str) -> bool:
    """A participial phrase without a main clause ("Starring …", "Directed by …, and music by …")."""
    sentence = sentence.lstrip("(")  # "(Funded by the U.S. President's Emergency Plan …; … NCT00398996.)"
    return bool(
        _PARTICIPLE_OPENER.match(sentence) and not _FINITE.search(sentence) and not _MAIN_CLAUSE.search(sentence)
    )


# "… were 8.5 and 26.3 cases per 100 person-years, respectively": the first "and" joins the values, so the
# things they belong to were named before ("Sepsis-2 and Sepsis-3 (12.5% and 11.4%, respectively)" names them).
_VALUES_AND = re.compile(r"^[^&]*?\d[\d.,%]*\)?(?:\s+[a-z%]+)?\s+and\s+[(\d]")


def respectively_without_referents(sentence: str) -> bool:
    """ "respectively" whose first "and" joins the values, not the things they belong to."""
    if "respectively" not in sentence:
        return False
    head = sentence[: sentence.find(" and ") + 8] if " and " in sentence else ""
    return bool(head and _VALUES_AND.match(head))


def standalone_problem(sentence: str) -> str | None:
    """Why `sentence` cannot stand alone (before any pronoun resolution); None when it can."""
    if sentence.startswith("("):
        return "an aside in parentheses on what the source said before"
    if definite_reference(sentence):
        return "a definite subject the source named before"
    if _MEMBERS_OF.match(sentence):
        return "lists members of something named before"
    if _REFERS_BACK.match(sentence):
        return "refers to the sentence before"
    if _clause_refers_back(sentence):
        return "its opening clause refers to the sentence before"
    if _REFERS_BACK_INSIDE.search(sentence):
        return "refers to something the source named before"
    if _SUBJECT_POSSESSIVE.match(sentence):
        return "a possessive in the subject with nothing to point to"
    if _has_example_variable(sentence) or _ARTICLE_VARIABLE.search(sentence):
        return "a variable of an example the source set up before"
    if _ALSO_IN_CONDITION.search(sentence):
        return "a condition on something the source named before (also …)"
    if _EMPTY_QUOTES.search(sentence):
        return "a name is missing (empty quotes)"
    if _RELATIVE_TIME.search(sentence):
        return "a time counted from when the source was written"
    if _time_from_event(sentence):
        return "a time counted from an event the source told before"
    if _METHOD.search(sentence):
        return "describes the source's own method, not a claim about the world"
    if verbless_fragment(sentence):
        return "a phrase without a main verb"
    if respectively_without_referents(sentence):
        return "refers to something the source named before"
    return None


def _clause_refers_back(sentence: str) -> bool:
    """An opening clause about something named before (`_CLAUSE_REFERS_BACK`), not one whose "it" points
    forward as a sentence-opening expletive "It" does ("While it is possible to …": `_EXPLETIVE_IT`)."""
    match = _CLAUSE_REFERS_BACK.match(sentence)
    if match is None:
        return False
    return (match.group(1) or "").lower() != "it" or not _EXPLETIVE_IT.match("It" + sentence[match.end(1) :])


# "Hedford left in 1998 …" after "… and drummer Eric Hedford": one name, then a lower-case word.
_LONE_NAME = re.compile(r"^([A-Z][a-z][\w'’\-]*) (?:[a-z]+ )?[a-z]+\b")
_NOT_A_FIRST_NAME = {
    "The", "A", "An", "In", "On", "At", "For", "By", "With", "From", "To", "Of", "And", "But", "Or", "If", "When",
    "This", "That", "These", "Those", "As", "After", "Before", "During", "Since", "While", "Both", "Each", "Its",
}  # fmt: skip


def named_in_full_before(sentence: str, earlier: list[str], subject: str | None) -> bool:
    """The sentence opens with a lone last name of someone an earlier sentence named in full
    ("drummer Eric Hedford." … "Hedford left in 1998"), who is not the passage's subject ("Hunt has
    also won …"). The full name ends there: "SQLite Foreign Key Support" names no "Foreign"."""
    match = _LONE_NAME.match(sentence)
    if not match:
        return False
    name = match.group(1)
    if subject and name in subject.replace('"', " ").replace("“", " ").replace("”", " ").split():
        return False
    pattern = re.compile(rf"\b([A-Z][\w'’\-]+) {re.escape(name)}\b(?!\s+[A-Z0-9(])")
    return any(before.group(1) not in _NOT_A_FIRST_NAME for text in earlier for before in pattern.finditer(text))


@dataclass
class Candidate:
    """One sentence of a passage: its text as stored, and why it is not kept (None = kept)."""

    sentence: str
    text: str
    problem: str | None


def _resolve(
    sentence: str, subject: str | None, previous_about_subject: bool, plural: bool, person: bool
) -> str | None:
    """`sentence` with its leading pronoun replaced by the subject, or None when not certain (no subject, the
    previous sentence is about something else, the number disagrees, or "it" when the subject is a person: "Her
    first novel … was published … It was selected as one of …" is about the novel)."""
    match = _PRONOUN.match(sentence)
    if not match or _EXPLETIVE_IT.match(sentence):
        return sentence
    word = match.group(1).lower()
    if subject is None or not previous_about_subject or (word in ("they", "their")) != plural:
        return None
    if person and word in ("it", "its"):
        return None
    replacement = f"{subject}'s" if word in _POSSESSIVE else subject
    return replacement + " " + sentence[match.end() :]


# A person's first sentence: "Grace Krilanovich (born October 5, 1979) is an American author."
_PERSON = re.compile(r"\((?:born|b\.|née|né)\s|\(\d{3,4}\s*[–-]\s*\d{3,4}\)")


def _opens_with(sentence: str, subject: str | None) -> bool:
    """The sentence opens with the subject's name ("Scott …" for "Scott Buchholz"; "The Brisbane …")."""
    if not subject:
        return False
    words = subject.split()
    if not words:
        return False
    key = " ".join(words[:2]) if words[0] in ("The", "A", "An") else words[0]
    return sentence.startswith(key)


def passage_candidates(text: str, title: str = "") -> list[Candidate]:
    """Every sentence of the passage with its stored text and, when dropped, the reason."""
    sentences = join_initials([_MARKUP.sub("", normalize_space(s)).strip("*_") for s in block_sentences(text)])
    subject = passage_subject([_SECTION.sub("", s, count=1) for s in sentences[:1]], title)
    plural = bool(sentences) and bool(re.search(r"^[^()]*?\b(?:are|were|have)\b", sentences[0]))
    person = bool(sentences) and bool(_PERSON.search(sentences[0]))  # the subject is a person: "it" is not them
    out: list[Candidate] = []
    about_subject = False  # the previous sentence is about the passage's subject
    doubtful_start = window_start_doubtful(sentences, title)
    for index, (sentence, in_methods) in enumerate(zip(sentences, method_sections(sentences), strict=True)):
        stripped = _STRIP_PREFIX.sub("", _SECTION.sub("", sentence, count=1), count=1)
        stripped = stripped[0].upper() + stripped[1:] if stripped and stripped != sentence else stripped
        if index:  # a definition list's description, after its term's line
            stripped = described_term(sentences[index - 1], stripped) or stripped
        problem = None if is_whole(sentence) else "cut: not a whole sentence"
        if problem is None and doubtful_start and not out:
            problem = "cut: the passage is a window of words and this probably starts mid-sentence"
        problem = problem or claim_problem(stripped)
        resolved = _resolve(stripped, subject, about_subject, plural, person) if problem is None else stripped
        if problem is None and resolved is None:
            problem = "a pronoun whose subject is not certain"
        if problem is None and in_methods:
            problem = "in the method section of a study: describes the study, not the world"
        text_out = _head_noun_subject(resolved or stripped, sentences[0], subject)
        problem = problem or standalone_problem(text_out) or inner_pronoun_problem(text_out, subject)
        if problem is None and named_in_full_before(text_out, sentences[:index], subject):
            problem = "a name the passage gave in full before (who is it?)"
        out.append(Candidate(sentence, text_out, problem))
        about_subject = _opens_with(sentence, subject) or (about_subject and bool(_PRONOUN.match(sentence)))
        pronoun = _PRONOUN.match(sentence)
        person = person or (about_subject and pronoun is not None and pronoun.group(1).lower() in _PERSONAL)
    return out


def passage_claims(text: str, title: str = "") -> list[str]:
    """The passage's sentences worth storing as facts, in document order (see the module doc)."""
    return [c.text for c in passage_candidates(text, title) if c.problem is None]
