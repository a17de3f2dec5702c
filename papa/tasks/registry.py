"""Task registry: one declarative entry per probing task of the paper (Sec. 4.1, App. B / Table 3).

A `TaskSpec` says what the task is, its Table 3 hyper-parameters, and where its data lives on the hub and locally.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from papa.core.errors import Arg, InputError, PapaError

TaskKind = Literal["sentence", "pair", "token", "mlm", "lm", "next_token"]
ReaderName = Literal["tsv", "conll", "wikitext"]

#: Kinds whose targets are the vocabulary, not classes (scored by -log perplexity): masked tokens, and the next
#: token by a causal LM's own head ("lm") or by a probe ("next_token").
VOCABULARY_KINDS: tuple[TaskKind, ...] = ("mlm", "lm", "next_token")
#: Kinds that label each slot with the next real token: for causal LMs only (an encoder's slot sees that token).
NEXT_TOKEN_KINDS: tuple[TaskKind, ...] = ("lm", "next_token")
#: Kinds labelled slot by slot ([N, n] labels, -100 where none): their probes classify only the labelled slots.
POSITION_KINDS: tuple[TaskKind, ...] = ("token", *VOCABULARY_KINDS)

# Label names are the hub datasets' ClassLabel names, in their order, so that label ids agree between the
# hub and the local readers. GLUE: the `glue` dataset script (label_classes of each GlueConfig).
COLA_LABELS: tuple[str, ...] = ("unacceptable", "acceptable")
SST2_LABELS: tuple[str, ...] = ("negative", "positive")
MRPC_LABELS: tuple[str, ...] = ("not_equivalent", "equivalent")
MNLI_LABELS: tuple[str, ...] = ("entailment", "neutral", "contradiction")

# CoNLL-2003: the `conll2003` dataset script (features ner_tags / pos_tags), now eriktks/conll2003 on the hub.
CONLL_NER_LABELS: tuple[str, ...] = (
    "O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC",
)
CONLL_POS_LABELS: tuple[str, ...] = (
    '"', "''", "#", "$", "(", ")", ",", ".", ":", "``",
    "CC", "CD", "DT", "EX", "FW", "IN", "JJ", "JJR", "JJS", "LS", "MD",
    "NN", "NNP", "NNPS", "NNS", "NN|SYM", "PDT", "POS", "PRP", "PRP$",
    "RB", "RBR", "RBS", "RP", "SYM", "TO", "UH",
    "VB", "VBD", "VBG", "VBN", "VBP", "VBZ", "WDT", "WP", "WP$", "WRB",
)


@dataclass(frozen=True)
class ProbeHParams:
    """Probing-classifier hyper-parameters of one task (paper, Table 3)."""

    learning_rate: float
    batch_size: int
    epochs: int
    max_length: int


@dataclass(frozen=True)
class HubSource:
    """Where a task lives on the Hugging Face hub and which columns hold what."""

    dataset: str
    config: str | None
    train_split: str
    eval_split: str
    text_column: str | None = None
    text_pair_column: str | None = None
    words_column: str | None = None
    label_column: str | None = None


@dataclass(frozen=True)
class LocalSource:
    """Where a task lives under the local data directory, in the dataset's original file format. A TSV column is a
    header name, or a 0-based index without ``header``; ``label_is_name``: the labels are names (MNLI). A CoNLL
    ``label_column`` is 1 (POS) or 3 (NER)."""

    reader: ReaderName
    train_file: str
    eval_file: str
    header: bool = True
    n_fields: int | None = None
    text_column: str | int | None = None
    text_pair_column: str | int | None = None
    label_column: str | int | None = None
    label_is_name: bool = False
    iob1_to_iob2: bool = False


@dataclass(frozen=True)
class TaskSpec:
    """One probing task: what it is, how to probe it, and where its data comes from. With ``holdout_every`` (MLM)
    article ``k`` of the one source split goes to eval when ``k % holdout_every == holdout_offset``, else to train."""

    name: str
    kind: TaskKind
    metric: str
    label_names: tuple[str, ...]
    hparams: ProbeHParams
    hub: HubSource
    local: LocalSource
    holdout_every: int | None = None
    holdout_offset: int = 0
    corpus_name: str | None = None  # how pages name the text it reads, where that is not the task (WikiText)

    @property
    def corpus(self) -> str:
        """The text this task reads, as pages name it (``WikiText``, ``MNLI``)."""
        return self.corpus_name or self.name.upper()

    @property
    def token_level(self) -> bool:
        """Whether the probe labels tokens (NER, POS, MLM): such inputs follow the token-task layout rule."""
        return self.kind in ("token", "mlm")

    @property
    def trains_probe(self) -> bool:
        """Whether a probe is trained: not for LM, scored by the decoder's own frozen LM head."""
        return self.kind != "lm"

    @property
    def vocabulary_targets(self) -> bool:
        """Whether the targets are vocabulary tokens, not classes (`VOCABULARY_KINDS`: MLM, LM, LM probe)."""
        return self.kind in VOCABULARY_KINDS

    @property
    def predicts_next_token(self) -> bool:
        """Whether each slot is labelled with the next real token (`NEXT_TOKEN_KINDS`): a causal LM's task."""
        return self.kind in NEXT_TOKEN_KINDS

    @property
    def num_labels(self) -> int:
        """Number of classes (0 for the vocabulary-target kinds: MLM, LM and LM probe)."""
        return len(self.label_names)

    @property
    def train_split(self) -> str:
        """The hub split that training examples come from."""
        return self.hub.train_split

    @property
    def eval_split(self) -> str:
        """The hub split that evaluation examples come from (the paper reports validation results)."""
        return self.hub.eval_split


_GLUE = "nyu-mll/glue"
_CONLL = "eriktks/conll2003"
_WIKITEXT = "Salesforce/wikitext"
# MLM and LM read the same text: WikiText's validation split, whose 60 articles are split into train and eval.
_WIKITEXT_HUB = HubSource(_WIKITEXT, "wikitext-103-raw-v1", "validation", "validation", text_column="text")
_WIKITEXT_LOCAL = LocalSource("wikitext", "wikitext/wiki.valid.raw", "wikitext/wiki.valid.raw")

def _wikitext_task(name: str, kind: TaskKind) -> TaskSpec:
    """A task over the vocabulary on WikiText's validation text, with Table 3's MLM row."""
    return TaskSpec(name=name, kind=kind, metric="neg_log_perplexity", label_names=(),
                    hparams=ProbeHParams(learning_rate=5e-4, batch_size=8, epochs=2, max_length=128),
                    hub=_WIKITEXT_HUB, local=_WIKITEXT_LOCAL, holdout_every=10, holdout_offset=5,
                    corpus_name="WikiText")


def _conll_task(name: str, labels: tuple[str, ...], learning_rate: float, hub_column: str, column: int, *,
                iob1: bool = False) -> TaskSpec:
    """A CoNLL-2003 tagging task: labels from `hub_column` on the hub, `column` of the local files (IOB1 tags
    re-tagged as IOB2 with `iob1`). Scored by seqeval, POS too, as HF run_ner (used by the official code) computes it
    for every task."""
    return TaskSpec(name=name, kind="token", metric="seqeval_f1", label_names=labels,
                    hparams=ProbeHParams(learning_rate=learning_rate, batch_size=8, epochs=4, max_length=128),
                    hub=HubSource(_CONLL, None, "train", "validation", words_column="tokens", label_column=hub_column),
                    local=LocalSource("conll", "conll2003/eng.train", "conll2003/eng.testa", label_column=column,
                                      iob1_to_iob2=iob1))


def corpus_label(corpus: str) -> str:
    """How pages name a constants corpus: the text a task reads, "the task's own" for ``task``, else as given."""
    if corpus == "task":
        return "the task's own"
    return TASKS[corpus].corpus if corpus in TASKS else corpus


TASKS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        TaskSpec(
            name="cola",
            kind="sentence",
            metric="matthews_correlation",
            label_names=COLA_LABELS,
            hparams=ProbeHParams(learning_rate=2e-5, batch_size=16, epochs=15, max_length=64),
            hub=HubSource(_GLUE, "cola", "train", "validation", text_column="sentence", label_column="label"),
            # GLUE CoLA: source, label, original label, sentence; no header.
            local=LocalSource(
                "tsv", "glue_data/CoLA/train.tsv", "glue_data/CoLA/dev.tsv",
                header=False, n_fields=4, text_column=3, label_column=1,
            ),
        ),
        TaskSpec(
            name="sst2",
            kind="sentence",
            metric="accuracy",
            label_names=SST2_LABELS,
            hparams=ProbeHParams(learning_rate=1e-4, batch_size=32, epochs=4, max_length=64),
            hub=HubSource(_GLUE, "sst2", "train", "validation", text_column="sentence", label_column="label"),
            local=LocalSource(
                "tsv", "glue_data/SST-2/train.tsv", "glue_data/SST-2/dev.tsv",
                text_column="sentence", label_column="label",
            ),
        ),
        TaskSpec(
            name="mrpc",
            kind="pair",
            metric="f1",
            label_names=MRPC_LABELS,
            hparams=ProbeHParams(learning_rate=2e-5, batch_size=16, epochs=15, max_length=128),
            hub=HubSource(
                _GLUE, "mrpc", "train", "validation",
                text_column="sentence1", text_pair_column="sentence2", label_column="label",
            ),
            local=LocalSource(
                "tsv", "glue_data/MRPC/train.tsv", "glue_data/MRPC/dev.tsv",
                text_column="#1 String", text_pair_column="#2 String", label_column="Quality",
            ),
        ),
        TaskSpec(
            name="mnli",
            kind="pair",
            metric="accuracy",
            label_names=MNLI_LABELS,
            hparams=ProbeHParams(learning_rate=2e-4, batch_size=8, epochs=4, max_length=256),
            # The paper reports the mismatched validation split (Sec. 4.1, footnote 11).
            hub=HubSource(
                _GLUE, "mnli", "train", "validation_mismatched",
                text_column="premise", text_pair_column="hypothesis", label_column="label",
            ),
            local=LocalSource(
                "tsv", "glue_data/MNLI/train.tsv", "glue_data/MNLI/dev_mismatched.tsv",
                text_column="sentence1", text_pair_column="sentence2", label_column="gold_label",
                label_is_name=True,
            ),
        ),
        _conll_task("ner", CONLL_NER_LABELS, 1e-4, "ner_tags", 3, iob1=True),
        _conll_task("pos", CONLL_POS_LABELS, 5e-4, "pos_tags", 1),
        # Articles 5, 15, ..., 55 of WikiText's validation text are eval: about 10% of the words.
        _wikitext_task("mlm", "mlm"),
        # Decoders only: the next token by the model's own frozen LM head (no probe; the paper has no values).
        _wikitext_task("lm", "lm"),
        # Decoders only: the next token by a probe trained from scratch on all hidden states.
        _wikitext_task("lm_probe", "next_token"),
    )
}


class UnknownTaskError(PapaError, ValueError):
    """No task of that name."""


def task_names() -> list[str]:
    """Names of all registered tasks, in registry order."""
    return list(TASKS)


def check_task_fits_model(spec: TaskSpec, causal: bool, model: str) -> None:
    """Raise `InputError` when `spec` cannot run on `model`: next-token tasks need a causal LM, MLM an encoder."""
    if spec.predicts_next_token and not causal:
        decoder = Arg("model", "smollm2")
        what = ("scores a causal LM with its own LM head" if not spec.trains_probe else
                "probes a causal LM's hidden states for the next token (a bidirectional encoder's slot sees that "
                "token)")
        raise InputError(f"task {spec.name!r} {what}, and {model!r} is not one (or its config is not on this "
                         f"machine): pass a decoder, e.g. {decoder}, or probe an encoder with mlm", advice=[decoder])
    if spec.kind == "mlm" and causal:
        raise InputError(f"task {spec.name!r} masks tokens for a bidirectional encoder; {model!r} is a causal LM: use "
                         "the lm task (its own LM head) or lm_probe (a probe trained from scratch)")


def get_task(name: str) -> TaskSpec:
    """Return the spec of task ``name``; raise ``ValueError`` naming the known tasks if there is none."""
    try:
        return TASKS[name]
    except (KeyError, TypeError):
        raise UnknownTaskError(f"unknown task {name!r}; known tasks: {', '.join(TASKS)}") from None
