"""Prompt templates for the models layer and the KB: fact extraction, fact merging, the stands-alone check,
JSON retry.

Every prompt is a `Prompt` with named `$slots` (string.Template syntax, so JSON braces in
the text need no escaping). `prompt.messages(**slots)` fills them and refuses missing or
unknown slots, so a renamed slot fails loudly instead of sending a half-filled prompt.
The research loop keeps its own prompts, on the same `Prompt`, in `deepresearch/research/prompts.py`.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

from deepresearch.facts import CATEGORIES


@dataclass(frozen=True)
class Prompt:
    """A system + user message pair with `$name` slots."""

    name: str
    system: str
    user: str

    @property
    def slots(self) -> set[str]:
        """The slot names this prompt needs."""
        names: set[str] = set()
        for text in (self.system, self.user):
            for _, named, braced, _ in string.Template.pattern.findall(text):
                if named or braced:
                    names.add(named or braced)
        return names

    def messages(self, **values: Any) -> list[dict[str, str]]:
        """Chat messages with every slot filled; missing or unknown slots raise KeyError."""
        missing, unknown = self.slots - set(values), set(values) - self.slots
        if missing or unknown:
            raise KeyError(f"prompt {self.name}: missing slots {sorted(missing)}, unknown {sorted(unknown)}")
        text = {k: str(v) for k, v in values.items()}
        out = []
        if self.system:
            out.append({"role": "system", "content": string.Template(self.system).substitute(text)})
        out.append({"role": "user", "content": string.Template(self.user).substitute(text)})
        return out


_CATEGORY_GUIDE = (
    "market_data (shares, prices, rankings, growth, revenue), "
    "product_info (features, specs, versions, releases), "
    "strategy (plans, investments, partnerships, acquisitions), "
    "technology (principles, architectures, standards, protocols), "
    "historical (events that happened, births, foundings, milestones)"
)

EXTRACT_FACTS = Prompt(
    name="extract_facts",
    system=(
        "You extract facts from a source text. A fact is one short, self-contained sentence that "
        "states one checkable claim, copied or closely paraphrased from the source, naming its "
        "subject (no 'he', 'it', 'this'). Never invent, never use outside knowledge, never copy "
        "these instructions. Answer with JSON only."
    ),
    user=(
        "Research topic: $topic\n\n"
        'Source text:\n"""\n$text\n"""\n\n'
        "List up to $max_facts facts from the source text, most relevant to the topic first. "
        f"category is one of: {_CATEGORY_GUIDE}. "
        "confidence (0.5 to 1.0) is how clearly the source states it.\n"
        'Answer as {"facts": [{"fact": "...", "category": "...", "confidence": 0.9}]}'
    ),
)


def extract_schema(max_facts: int) -> dict[str, Any]:
    """JSON schema of an EXTRACT_FACTS answer (kept small: big schemas make slow grammars)."""
    return {
        "type": "object",
        "properties": {
            "facts": {
                "type": "array",
                "maxItems": max_facts,
                "items": {
                    "type": "object",
                    "properties": {
                        "fact": {"type": "string"},
                        "category": {"enum": list(CATEGORIES)},
                        # A short enum, not a number: the grammar stays small and tiny
                        # models cannot run off into 16-digit numbers.
                        "confidence": {"enum": [0.5, 0.6, 0.7, 0.8, 0.9, 1.0]},
                    },
                    "required": ["fact", "category", "confidence"],
                },
            }
        },
        "required": ["facts"],
    }


MERGE_FACTS = Prompt(
    name="merge_facts",
    system=(
        "You merge two versions of a fact into one sentence. Keep every detail of the old fact "
        "that the new fact does not contradict or replace; take the new value where they "
        "disagree. Add nothing else. Answer with JSON only."
    ),
    user=(
        "Old fact: $old\nNew fact: $new\n\n"
        'Example: old "The cat is 2 years old and very clingy", new "The cat is 3 years old" -> '
        '{"merged": "The cat is 3 years old and very clingy", "contradiction": false}\n'
        "Set contradiction to true only if the two cannot both be true and the new one does not "
        'simply update the old one.\nAnswer as {"merged": "...", "contradiction": false}'
    ),
)

MERGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"merged": {"type": "string"}, "contradiction": {"type": "boolean"}},
    "required": ["merged", "contradiction"],
}

JUDGE_VERDICTS = ("same", "update", "contradiction", "distinct")

JUDGE_FACTS = Prompt(
    name="judge_facts",
    system=(
        "You compare two facts, in any language, and answer with one relation.\n"
        "distinct: they state different things: another subject, event, action, attribute or time,"
        " or one says something the other does not.\n"
        "same: they state the same thing in other words; no value differs.\n"
        "update: they state the same thing about the same subject, except one value (a number, date,"
        " name or title) that the new fact changes.\n"
        "contradiction: like update, but the two values cannot both be true.\n"
        "When unsure, answer distinct. Answer with JSON only."
    ),
    user=(
        'Old: "Paris has 2.1 million inhabitants." New: "Rome has 2.8 million inhabitants." -> distinct\n'
        'Old: "A man is playing a guitar." New: "A man is playing a flute." -> distinct\n'
        'Old: "The prize went to Ana María Ruiz in 2019." New: "In 2019 the prize was awarded to Li Wei." -> update\n'
        'Old: "立法会共有70个议席。" New: "立法会总共有70个议席。" -> same\n'
        "Old: $old\nNew: $new\n"
        'Answer as {"relation": "distinct" | "same" | "update" | "contradiction"}'
    ),
)

JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"relation": {"enum": list(JUDGE_VERDICTS)}},
    "required": ["relation"],
}

# The `check` model step's question (models/standalone.py `ModelCheck`): does a sentence copied out of a document
# stand alone? Everything fixed is the system prompt, first, so llama.cpp reuses the evaluated prefix; the user turn
# is only the title and the sentence. Variant v3 of docs/BENCHMARKS.md, session 18 (the criteria and seven invented
# examples, none from the labeled set); scripts/eval_standalone_judge.py builds its other variants from this text.
STANDALONE_EXAMPLES = (
    "\nExamples:\n"
    "Title: Marie Curie. Sentence: Marie Curie won the Nobel Prize in Physics in 1903. -> true\n"
    "Title: Marie Curie. Sentence: She moved to Paris in 1891. -> false\n"
    "Title: Lake Baikal. Sentence: The lake holds about a fifth of the world's fresh surface water. -> false\n"
    "Title: HTTP caching. Sentence: A cache stores responses so that later requests are answered faster. -> true\n"
    "Title: HTTP caching. Sentence: In this case, the header is ignored. -> false\n"
    "Title: Aspirin trial. Sentence: Patients in the treatment group had fewer strokes. -> false\n"
    "Title: Aspirin trial. Sentence: Aspirin reduces the risk of a second heart attack. -> true"
)
STANDALONE_CHECK = Prompt(
    name="standalone_check",
    system=(
        "You check sentences copied out of a document before they are stored as facts in a knowledge base that is"
        " read without the document. A sentence stands alone when a reader who never saw the document understands"
        " what it claims: it names what it talks about (no 'it', 'they', 'this', 'the band', 'the study', 'the"
        " function' pointing back to something named earlier; no example's variable) and it states a complete claim"
        " (not a heading, an instruction, a question, a caption or a pointer such as 'see below'). The document's"
        " title may name the subject."
        + STANDALONE_EXAMPLES
        + '\nAnswer with JSON only: {"alone": true} if the sentence stands alone, {"alone": false} if not.'
    ),
    user="Title: $title\nSentence: $sentence",
)

STANDALONE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"alone": {"type": "boolean"}},
    "required": ["alone"],
}

JSON_RETRY = Prompt(
    name="json_retry",
    system="",
    user="That answer was invalid ($problems). Answer again with JSON only, exactly in the requested shape.",
)
