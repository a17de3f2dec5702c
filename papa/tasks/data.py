"""Loading task examples from local files (the datasets' original formats) or the Hugging Face hub.

The source is ``data_dir``, else ``$PAPA_DATA_DIR``, else the hub; both give the same examples in the same order
with the same label ids (TSVs split on tabs only, texts verbatim; CoNLL ``-DOCSTART-`` lines separate documents and
IOB1 tags become IOB2; a WikiText example is one paragraph).
"""
from __future__ import annotations

import os
import random
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from papa.core.errors import Arg, InputError, PapaError, check_one_of
from papa.core.vocabulary import SAMPLES, SPLITS
from papa.tasks.registry import LocalSource, TaskSpec, get_task

__all__ = ["DATA_DIR_ENV", "Example", "DataNotFoundError", "DataFormatError", "DataSourceError", "check_task_files",
           "load_examples", "resolve_data_dir", "read_tsv", "read_conll", "read_wikitext", "iob1_to_iob2",
           "split_mlm_paragraphs"]

DATA_DIR_ENV = "PAPA_DATA_DIR"
SUBSET_SEED = 0


class DataNotFoundError(PapaError, FileNotFoundError):
    """A local data file is missing."""


class DataFormatError(PapaError, ValueError):
    """A data file (or hub split) does not have the expected format, or yields no examples."""


class DataSourceError(PapaError, RuntimeError):
    """The Hugging Face hub could not provide the dataset."""


@dataclass(frozen=True)
class Example:
    """One example: ``text`` (+ ``text_pair``) for sentence/pair/MLM tasks, ``words`` for token tasks. ``label`` is a
    class id, a tuple of per-word class ids (token tasks), or None (MLM)."""

    text: str | None = None
    text_pair: str | None = None
    words: tuple[str, ...] | None = None
    label: int | tuple[int, ...] | None = None


# ----------------------------------------------------------------------------------------------- public


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """The local data directory to use: ``data_dir``, else ``$PAPA_DATA_DIR``, else None (= the hub)."""
    if data_dir is not None:
        return Path(data_dir)
    env = os.environ.get(DATA_DIR_ENV, "").strip()
    return Path(env) if env else None


def check_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """`resolve_data_dir`, with a `DataNotFoundError` when the directory it names does not exist."""
    root = resolve_data_dir(data_dir)
    if root is not None and not root.is_dir():
        given = Arg("data_dir", str(data_dir)) if data_dir is not None else None
        origin = f"given as {given}" if given is not None else f"from ${DATA_DIR_ENV}"
        raise DataNotFoundError(
            f"data directory {root} ({origin}) does not exist: point it at the folder that holds "
            f"glue_data/, conll2003/ and wikitext/, or unset it to download from the Hugging Face hub.",
            advice=[given] if given is not None else [])
    return root


def check_task_files(task: str | TaskSpec, splits: Sequence[str],
                     data_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """`check_data_dir`, and where a data folder is set, a `DataNotFoundError` for the first of `task`'s `splits`
    whose file it lacks."""
    root = check_data_dir(data_dir)
    if root is None:
        return None
    spec = get_task(task) if isinstance(task, str) else task
    for split in splits:
        check_one_of(split, SPLITS, "split")
        _check_exists(root / _local_file(spec.local, split))
    return root


def load_examples(
    task: str | TaskSpec,
    split: str,
    data_dir: str | os.PathLike[str] | None = None,
    limit: int | None = None,
    sample: str = "first",
) -> list[Example]:
    """Load the ``"train"`` or ``"eval"`` examples of ``task``; ``limit`` keeps the first ones (``sample="first"``)
    or a fixed random subset in file order (``"random"``, seed `SUBSET_SEED`)."""
    spec = task if isinstance(task, TaskSpec) else get_task(task)
    check_one_of(split, SPLITS, "split")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive integer or None, got {limit!r}")
    check_one_of(sample, SAMPLES, "sample")

    root = check_data_dir(data_dir)
    if root is not None:
        examples = _local_examples(spec, split, root)
        where = f"{root / _local_file(spec.local, split)}"
    else:
        examples = _hub_examples(spec, split)
        hub_split = spec.hub.train_split if split == "train" else spec.hub.eval_split
        where = f"hub dataset {spec.hub.dataset} ({spec.hub.config or 'default'}) split {hub_split!r}"

    if spec.holdout_every is not None:  # MLM and LM: train and eval are held-out articles of one file
        examples = _mlm_examples(examples, spec, split)
    if sample == "first":
        out = list(islice(examples, limit))
    else:
        examples = list(examples)
        out = [examples[i] for i in subset_indices(len(examples), limit, "random")]
    if not out:
        raise DataFormatError(f"task {spec.name!r}, split {split!r}: no examples in {where}: check that it is the "
                              "complete file (or the right hub split)")
    return out


# --------------------------------------------------------------------------------------------- readers


def read_tsv(
    path: str | os.PathLike[str],
    *,
    header: bool,
    n_fields: int | None = None,
    text_column: str | int | None,
    text_pair_column: str | int | None = None,
    label_column: str | int | None,
    label_names: tuple[str, ...],
    label_is_name: bool = False,
) -> Iterator[Example]:
    """Read a GLUE-layout TSV; every line must have the header's (or ``n_fields``) tab-separated fields."""
    path = Path(path)
    _check_exists(path)
    # The BOM that starts MRPC's header is dropped; lines split on LF only, as the files do.
    lines = _text_lines(path, bom=True)
    index: dict[str | int, int] = {}
    if header:
        first = next(lines, None)
        if first is None:
            raise DataFormatError(f"{path}: empty file, expected a header line")
        names = _split_line(first[1])
        index = {name: i for i, name in enumerate(names)}
        for column in (text_column, text_pair_column, label_column):
            if column is not None and column not in index:
                raise DataFormatError(f"{path}, line 1: header {names} has no column {column!r}: "
                                      "is it the right (unmodified GLUE) file?")
        n_fields = len(names)
    if n_fields is None:
        raise ValueError("read_tsv: n_fields is required when the file has no header")

    text_i, pair_i, label_i = (None if column is None else index[column] if header else int(column)
                               for column in (text_column, text_pair_column, label_column))
    for line_no, line in lines:
        fields = _split_line(line)
        if fields == [""]:
            continue  # a blank line (e.g. a trailing one) carries no example
        if len(fields) != n_fields:
            raise DataFormatError(
                f"{path}, line {line_no}: expected {n_fields} tab-separated fields, got {len(fields)}: "
                "fix or remove that line (a stray tab, or a cut-off copy of the file?)"
            )
        label = None if label_i is None else _parse_label(fields[label_i], label_names, label_is_name, path, line_no)
        yield Example(text=fields[text_i] if text_i is not None else None,
                      text_pair=fields[pair_i] if pair_i is not None else None, label=label)


def read_conll(
    path: str | os.PathLike[str],
    *,
    label_column: int,
    label_names: tuple[str, ...],
    iob1_to_iob2_tags: bool = False,
) -> Iterator[Example]:
    """Read a CoNLL-2003 file (``word POS chunk NER`` per line, blank line between sentences, no ``-DOCSTART-``
    example)."""
    path = Path(path)
    _check_exists(path)
    ids = {name: i for i, name in enumerate(label_names)}
    words: list[str] = []
    tags: list[str] = []

    def sentence() -> Example:
        out = iob1_to_iob2(tags) if iob1_to_iob2_tags else tags
        return Example(words=tuple(words), label=tuple(ids[t] for t in out))

    for line_no, line in _text_lines(path):
        line = _strip_eol(line)
        if not line.strip() or line.startswith("-DOCSTART-"):
            if words:
                yield sentence()
                words, tags = [], []
            continue
        fields = line.split(" ")
        if len(fields) != 4:
            raise DataFormatError(
                f"{path}, line {line_no}: expected 4 space-separated fields (word POS chunk NER), "
                f"got {len(fields)}: fix or remove that line"
            )
        tag = fields[label_column]
        if tag not in ids:
            raise DataFormatError(f"{path}, line {line_no}: unknown tag {tag!r}; known: {list(label_names)}: "
                                  "fix that line")
        if iob1_to_iob2_tags and not (tag == "O" or tag[:2] in ("B-", "I-")):
            raise DataFormatError(f"{path}, line {line_no}: tag {tag!r} is not an IOB tag: fix that line")
        words.append(fields[0])
        tags.append(tag)
    if words:
        yield sentence()


def read_wikitext(path: str | os.PathLike[str]) -> list[str]:
    """The lines of a raw WikiText file (without line ends), one per hub row."""
    path = Path(path)
    _check_exists(path)
    return [_strip_eol(line) for _, line in _text_lines(path)]


def iob1_to_iob2(tags: Iterable[str]) -> list[str]:
    """Re-tag IOB1 (``B-`` only between two adjacent same-type chunks) as IOB2 (every chunk starts ``B-``)."""
    out: list[str] = []
    prev = "O"
    for tag in tags:
        if tag.startswith("I-") and (prev == "O" or prev[2:] != tag[2:]):
            tag = "B-" + tag[2:]
        out.append(tag)
        prev = tag
    return out


_HEADING = re.compile(r"(= )+.*?( =)+")
_ARTICLE_TITLE = re.compile(r"= [^=](.*[^=])? =")


def split_mlm_paragraphs(lines: Iterable[str]) -> list[tuple[int, str]]:
    """WikiText lines -> ``(article index, paragraph)`` pairs, dropping blank lines and headings; an article starts
    at each top-level heading (`` = Title = ``)."""
    out: list[tuple[int, str]] = []
    article = -1
    for line in lines:
        text = line.strip()
        if not text:
            continue
        if _HEADING.fullmatch(text):
            if _ARTICLE_TITLE.fullmatch(text):
                article += 1
            continue
        out.append((max(article, 0), text))
    return out


# ----------------------------------------------------------------------------------------------- local


def _local_file(source: LocalSource, split: str) -> str:
    return source.train_file if split == "train" else source.eval_file


def _local_examples(spec: TaskSpec, split: str, root: Path) -> Iterable[Example] | list[tuple[int, str]]:
    """Examples of a local file; for MLM ``(article, paragraph)`` pairs that ``_mlm_examples`` splits."""
    source = spec.local
    path = root / _local_file(source, split)
    if source.reader == "tsv":
        return read_tsv(
            path,
            header=source.header,
            n_fields=source.n_fields,
            text_column=source.text_column,
            text_pair_column=source.text_pair_column,
            label_column=source.label_column,
            label_names=spec.label_names,
            label_is_name=source.label_is_name,
        )
    if source.reader == "conll":
        assert isinstance(source.label_column, int)
        return read_conll(
            path, label_column=source.label_column, label_names=spec.label_names,
            iob1_to_iob2_tags=source.iob1_to_iob2,
        )
    if source.reader == "wikitext":
        return split_mlm_paragraphs(read_wikitext(path))
    raise ValueError(f"task {spec.name!r}: unknown local reader {source.reader!r}")


def _check_exists(path: Path) -> None:
    if not path.is_file():
        where = Arg("data_dir")
        raise DataNotFoundError(
            f"data file not found: {path}. Point {where} or ${DATA_DIR_ENV} at the folder that holds glue_data/, "
            f"conll2003/ and wikitext/, or unset both to download from the Hugging Face hub.", advice=[where])


def _text_lines(path: Path, *, bom: bool = False) -> Iterator[tuple[int, str]]:
    """(line number, line) of a UTF-8 file, split on LF only; `bom` drops a leading byte-order mark. A line that is
    not UTF-8 raises a `DataFormatError` naming it."""
    with path.open("rb") as f:
        for line_no, raw in enumerate(f, start=1):
            if bom and line_no == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            try:
                yield line_no, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataFormatError(f"{path}, line {line_no}: byte 0x{raw[exc.start]:02x} is not UTF-8 text: use the "
                                      "dataset's original (UTF-8) file, or convert this one") from None


def _strip_eol(line: str) -> str:
    # Lines are split on LF only; a CRLF copy (e.g. a Windows checkout) still reads the same.
    return line.removesuffix("\n").removesuffix("\r")


def _split_line(line: str) -> list[str]:
    return _strip_eol(line).split("\t")


def _parse_label(raw: str, names: tuple[str, ...], is_name: bool, path: Path, line_no: int) -> int:
    if is_name:
        if raw in names:
            return names.index(raw)
    elif raw.isdigit() and int(raw) < len(names):
        return int(raw)
    expected = list(names) if is_name else f"an id in 0..{len(names) - 1}"
    raise DataFormatError(f"{path}, line {line_no}: bad label {raw!r}, expected {expected}: fix that line")


# ------------------------------------------------------------------------------------------------- hub


def load_dataset(*args, **kwargs):
    """`datasets.load_dataset`, imported on first use: a run on local files never imports `datasets`."""
    import datasets

    return datasets.load_dataset(*args, **kwargs)


def _hub_examples(spec: TaskSpec, split: str) -> Iterable[Example] | list[tuple[int, str]]:
    """Examples of a hub split, in row order; for MLM ``(article, paragraph)`` pairs as for local files."""
    hub = spec.hub
    hub_split = hub.train_split if split == "train" else hub.eval_split
    try:
        ds = load_dataset(hub.dataset, hub.config, split=hub_split)
    except Exception as err:  # the hub raises many types (connection, auth, missing config)
        where = Arg("data_dir")
        raise DataSourceError(
            f"could not load {hub.dataset} ({hub.config or 'default'}) split {hub_split!r} from the Hugging Face "
            f"hub: {err}. To use local files instead, pass {where} or set ${DATA_DIR_ENV}.", advice=[where]
        ) from err
    from datasets import DatasetDict  # loaded by now

    if isinstance(ds, DatasetDict):  # load_dataset returns one when a split is not honoured
        if hub_split not in ds:
            raise DataSourceError(f"hub dataset {hub.dataset} has no split {hub_split!r}; it has {list(ds)}")
        ds = ds[hub_split]
    _check_hub_labels(spec, ds)

    if spec.local.reader == "wikitext":
        return split_mlm_paragraphs(row[hub.text_column] for row in ds)
    return _hub_rows(spec, ds)


def _hub_rows(spec: TaskSpec, ds: Iterable[dict]) -> Iterator[Example]:
    hub = spec.hub
    for row in ds:
        if spec.kind == "token":
            words = tuple(row[hub.words_column])
            if not words:
                continue  # the old conll2003 script could emit an empty last sentence
            yield Example(words=words, label=tuple(int(t) for t in row[hub.label_column]))
        else:
            yield Example(
                text=row[hub.text_column],
                text_pair=row[hub.text_pair_column] if hub.text_pair_column else None,
                label=int(row[hub.label_column]),
            )


def _check_hub_labels(spec: TaskSpec, ds: object) -> None:
    """Refuse a hub split whose ClassLabel names differ from the registry's (ids would silently disagree)."""
    features = getattr(ds, "features", None)
    if not spec.label_names or not features or spec.hub.label_column not in features:
        return
    feature = features[spec.hub.label_column]
    feature = getattr(feature, "feature", feature)  # Sequence/List(ClassLabel) for token tasks
    names = getattr(feature, "names", None)
    if names is not None and tuple(names) != spec.label_names:
        raise DataFormatError(
            f"task {spec.name!r}: hub column {spec.hub.label_column!r} has labels {list(names)}, "
            f"expected {list(spec.label_names)}"
        )


# ------------------------------------------------------------------------------------------- helpers


def _mlm_examples(paragraphs: Iterable[tuple[int, str]], spec: TaskSpec, split: str) -> Iterator[Example]:
    """Paragraphs -> examples of ``split``; train and eval are disjoint article sets (``TaskSpec.holdout_every``)."""
    return (Example(text=text) for article, text in paragraphs
            if (article % spec.holdout_every == spec.holdout_offset) == (split == "eval"))


def subset_indices(n: int, limit: int | None, sample: str = "first") -> list[int]:
    """Which of `n` items a `limit` keeps, in their order: the first ones, or a fixed random subset (`sample`)."""
    check_one_of(sample, SAMPLES, "sample")
    if limit is None or limit >= n:
        return list(range(n))
    if sample == "first":
        return list(range(limit))
    return sorted(random.Random(SUBSET_SEED).sample(range(n), limit))


#: Seeds the shuffle that cuts the examples outside a grid's subset into disjoint parts (`disjoint_part`).
PART_SEED = 1


def disjoint_part(n: int, taken: Sequence[int], size: int, part: int) -> list[int]:
    """The `part`-th (1, 2, ...) block of `size` of the `n` examples not in `taken`, shuffled once (`PART_SEED`),
    in file order; raises `InputError` when the split is too small."""
    if isinstance(part, bool) or not isinstance(part, int) or part < 1:
        raise InputError(f"a disjoint part is numbered 1, 2, ... (part 0 is the grid's own subset), got {part!r}.")
    rest = sorted(set(range(n)) - set(taken))
    random.Random(PART_SEED).shuffle(rest)
    block = rest[(part - 1) * size:part * size]
    if len(block) < size:
        raise InputError(f"the split holds {n} examples, {len(taken)} of them in the grid's subset: part {part} of "
                         f"{size} examples outside it needs {len(taken) + part * size}; use a smaller part number, "
                         "or learn λ on fewer examples (the profile's rank_limit).")
    return sorted(block)


def half_part(n: int, part: int) -> list[int]:
    """The `part`-th (1 or 2) of two disjoint halves of `n` examples shuffled once (`PART_SEED`), in file order: the
    disjoint parts of a grid that trains on the whole split."""
    if isinstance(part, bool) or not isinstance(part, int) or part not in (1, 2):
        raise InputError(f"a grid that trains on the whole split draws its disjoint parts as two halves of it: part 1 "
                         f"or 2, got {part!r}.")
    if n < 2:
        raise InputError(f"the split holds {n} example(s): two halves need at least 2.")
    every = list(range(n))
    random.Random(PART_SEED).shuffle(every)
    first = (n + 1) // 2
    return sorted(every[:first] if part == 1 else every[first:])
