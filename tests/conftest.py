"""Shared fixtures: where the real data lives, and tiny random models of every supported architecture."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


class TensorSource:
    """A probe's feature source over fixed tensors, as `papa.probing.features.FeatureSource` is called: `data` for
    its length, and (features, attention mask, labels) of the rows asked for."""

    def __init__(self, feats, mask, labels):
        self.feats, self.mask, self.labels = feats, mask, labels
        self.data = labels

    def __call__(self, idx):
        return self.feats[idx], self.mask[idx], self.labels[idx]

#: Fifteen short texts of the tiny tokenizers' vocabulary (`tiny_task_data`): ragged in batches of 4.
TINY_TEXTS = ["the cat sat on the mat", "a dog", "it was the big mat and the cat", "good", "the film was bad"] * 3


def tiny_task_data(tok, task: str, max_length: int = 12):
    """(spec, encoded split) of 15 examples of `task`'s kind over `TINY_TEXTS`, in the BERT layout: labels cycling
    through the task's classes, a token task's one per word, an MLM task's text lengthened so that some tokens are
    masked."""
    from papa.probing.features import encode_task
    from papa.tasks.data import Example
    from papa.tasks.registry import get_task

    spec = get_task(task)
    if spec.kind == "token":
        examples = [Example(words=tuple(t.split()), label=tuple(i % spec.num_labels for i, _ in enumerate(t.split())))
                    for t in TINY_TEXTS]
    elif spec.kind == "pair":
        examples = [Example(text=t, text_pair=TINY_TEXTS[-1 - i], label=i % 2) for i, t in enumerate(TINY_TEXTS)]
    elif spec.kind == "mlm":
        examples = [Example(text=t + " and the dog ran to the mat") for t in TINY_TEXTS]
    else:
        examples = [Example(text=t, label=i % 2) for i, t in enumerate(TINY_TEXTS)]
    return spec, encode_task(tok, spec, examples, max_length=max_length, model_type="bert")


# The test environment (offline hub, an absolute data directory) is set by the repository's root conftest.py, which
# pytest loads for tests/ and for notebooks/ alike.


def _shared_dir(variable: str, name: str, holds: str) -> Path:
    """$`variable`, else ../shared/`name`; the test is skipped, saying what to set, when it is missing. An empty
    variable counts as unset: the Makefile exports PAPA_DATA_DIR empty when ../shared/data is absent, and Path("")
    would be the working directory."""
    path = Path(os.environ.get(variable) or REPO.parent / "shared" / name)
    if not path.is_dir():
        pytest.skip(f"no {name} directory at {path}: set {variable} to the folder holding {holds}")
    return path


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The local data directory (GLUE TSVs, CoNLL-2003, WikiText): $PAPA_DATA_DIR, else ../shared/data."""
    return _shared_dir("PAPA_DATA_DIR", "data", "glue_data/ and conll2003/")


@pytest.fixture(scope="session")
def hub_dir() -> Path:
    """Real tokenizers and configs (no weights) of the paper's models: $PAPA_HUB_DIR, else ../shared/hub."""
    return _shared_dir("PAPA_HUB_DIR", "hub", "the models' tokenizers")


@pytest.fixture(scope="session")
def chromium() -> str:
    """The system Chromium that the browser tests drive with Playwright (which then downloads no browser of its
    own); the test is skipped, saying what to install, without one."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no Chromium found (install Debian's `chromium` package; .ci/run does): the browser test is skipped")


def free_port() -> int:
    """A TCP port free on localhost now, for a test's own server."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def local_server(command: list[str], url: str, *, name: str, log: Path, timeout: float, **popen) -> Iterator[str]:
    """Start `command` (a server on localhost: JupyterLab, Voilà), its stderr into `log`; yield `url` once it answers
    200, and stop the server after (a browser test's fixture). Fails naming `name` and `log` when it exits or does not
    answer within `timeout` seconds."""
    with open(log, "wb") as stderr:
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, **popen)
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert server.poll() is None, f"{name} exited with {server.returncode}: see {log}"
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"{name} did not answer within {timeout:.0f} s: see {log}"
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


# ---- the device tests run on -------------------------------------------------------------------------------------

#: ``PAPA_TEST_DEVICE=cuda`` runs the device-agnostic tests on a GPU: tensors and models made without a device go
#: there (torch's default device), so the fast paths, capture and bf16 checks run unchanged on CUDA.
TEST_DEVICE = os.environ.get("PAPA_TEST_DEVICE", "cpu")
#: ``PAPA_TEST_DEFAULT_DEVICE=0`` keeps torch's default device on the CPU for every test, with PAPA_TEST_DEVICE=cuda
#: too (models still go to that device: `tiny_model`); a test marked ``explicit_device`` has it so whatever the
#: setting. The library places every tensor it makes itself, so it gives the same results either way.
DEFAULT_DEVICE_SCOPE = os.environ.get("PAPA_TEST_DEFAULT_DEVICE", "1").strip() not in ("0", "")
EXPLICIT_DEVICE = "explicit_device"


def pytest_configure(config):
    config.addinivalue_line("markers", f"{EXPLICIT_DEVICE}: the test places every tensor on the device it names, "
                                       "so PAPA_TEST_DEVICE does not become torch's default device for it")


@pytest.fixture(autouse=True)
def _test_device(request):
    if TEST_DEVICE == "cpu":
        yield
        return
    import torch

    if torch.device(TEST_DEVICE).type == "cuda" and not torch.cuda.is_available():
        pytest.skip(f"PAPA_TEST_DEVICE={TEST_DEVICE} but CUDA is not available here")
    if not DEFAULT_DEVICE_SCOPE or request.node.get_closest_marker(EXPLICIT_DEVICE) is not None:
        yield
        return
    with torch.device(TEST_DEVICE):
        yield


# ---- tiny random models of every supported architecture ----------------------------------------------------------

#: Every encoder family papa's registry verifies (papa.method.architectures.ARCHITECTURES); the invariant tests run on
#: each. Adding an architecture: its registry entry, plus its config in `tiny_model` and tokenizer in `tiny_tokenizer`.
ARCHS = ("bert", "roberta", "electra", "deberta", "deberta-v2", "distilbert", "albert", "xlm-roberta", "modernbert")
#: Causal LMs: attached and tested on raw token ids, and with a toy byte-level tokenizer in the decoder layout.
CAUSAL_ARCHS = ("llama", "qwen2", "gpt2")
_WORDS = ("the a cat dog sat on mat it was good bad very not movie film plot actor is and of to in "
          "john mary london paris runs ran big small").split()
_CHARS = "abcdefghijklmnopqrstuvwxyz"


def tiny_tokenizer(arch: str):
    """A real tokenizer of the architecture's family over a toy vocabulary (no files, no hub)."""
    from transformers import (AlbertTokenizer, BertTokenizer, DebertaTokenizer, DebertaV2Tokenizer, DistilBertTokenizer,
                              ElectraTokenizer, RobertaTokenizer, XLMRobertaTokenizer)

    if arch in ("bert", "electra", "distilbert", "modernbert"):  # ModernBERT: BERT's special tokens, a toy vocabulary
        vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *_WORDS])}
        cls = {"electra": ElectraTokenizer, "distilbert": DistilBertTokenizer}.get(arch, BertTokenizer)
        return cls(vocab=vocab)
    if arch in CAUSAL_ARCHS:  # byte-level BPE over single characters, end-of-text as pad (as GPT-2's has none)
        from transformers import GPT2Tokenizer

        vocab = {"<|pad|>": 0, "<|endoftext|>": 1}
        for c in _CHARS:
            vocab.setdefault(c, len(vocab))
            vocab.setdefault("Ġ" + c, len(vocab))
        return GPT2Tokenizer(vocab=vocab, merges=[], unk_token="<|endoftext|>", bos_token="<|endoftext|>",
                             eos_token="<|endoftext|>", pad_token="<|pad|>")
    if arch in ("roberta", "deberta"):
        specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"] if arch == "roberta" else \
            ["[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]"]
        vocab = {t: i for i, t in enumerate(specials)}
        for c in _CHARS:
            vocab.setdefault(c, len(vocab))
            vocab.setdefault("Ġ" + c, len(vocab))
        if arch == "roberta":
            return RobertaTokenizer(vocab=vocab, merges=[])
        return DebertaTokenizer(vocab=vocab, merges=[], bos_token="[CLS]", eos_token="[SEP]", sep_token="[SEP]",
                                cls_token="[CLS]", unk_token="[UNK]", pad_token="[PAD]", mask_token="[MASK]")
    if arch == "deberta-v2":
        pieces = [("[PAD]", 0.0), ("[CLS]", 0.0), ("[SEP]", 0.0), ("[UNK]", 0.0), ("[MASK]", 0.0)]
        pieces += [("▁" + c, -1.0) for c in _CHARS] + [(c, -2.0) for c in _CHARS]
        return DebertaV2Tokenizer(vocab=pieces)
    pieces = [("▁" + c, -1.0) for c in _CHARS] + [(c, -2.0) for c in _CHARS]
    if arch == "albert":
        return AlbertTokenizer(vocab=[("<pad>", 0.0), ("<unk>", 0.0), ("[CLS]", 0.0), ("[SEP]", 0.0), ("[MASK]", 0.0),
                                      *pieces])
    if arch == "xlm-roberta":
        return XLMRobertaTokenizer(vocab=[("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), *pieces,
                                          ("<mask>", 0.0)])
    raise ValueError(arch)


def tiny_model(arch: str, seed: int = 0, *, layers: int = 2, heads: int = 4, hidden: int = 32,
               attn_implementation: str | None = None, init_std: float = 0.02, lm_head: bool = False):
    """A random model of `arch` sized for unit tests, in eval mode, vocabulary matching `tiny_tokenizer`
    (`lm_head`: a causal LM with its head, as papa.load_model loads decoders).

    A larger `init_std` than transformers' 0.02 makes attention visibly matter to the outputs.
    """
    import torch
    from transformers import (AlbertConfig, AutoModel, BertConfig, DebertaConfig, DebertaV2Config, DistilBertConfig,
                              ElectraConfig, GPT2Config, LlamaConfig, ModernBertConfig, Qwen2Config, RobertaConfig,
                              XLMRobertaConfig)

    vocab_size = max(len(tiny_tokenizer(arch)), 64)
    pad = tiny_tokenizer(arch).pad_token_id
    common = dict(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                  intermediate_size=2 * hidden + 3, max_position_embeddings=128, pad_token_id=pad,
                  hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, initializer_range=init_std)
    sizes = dict(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                 intermediate_size=2 * hidden + 3, max_position_embeddings=128, initializer_range=init_std)
    if arch == "distilbert":
        config = DistilBertConfig(vocab_size=vocab_size, dim=hidden, n_layers=layers, n_heads=heads,
                                  hidden_dim=2 * hidden + 3, max_position_embeddings=128, pad_token_id=pad,
                                  dropout=0.1, attention_dropout=0.1, initializer_range=init_std)
    elif arch == "albert":  # one layer group: every layer runs the same attention module
        config = AlbertConfig(embedding_size=16, num_hidden_groups=1, **common)
    elif arch == "xlm-roberta":
        config = XLMRobertaConfig(**common)
    elif arch == "modernbert":  # layer 0 global, layer 1 a sliding window of +-4 tokens
        config = ModernBertConfig(**sizes, local_attention=8, global_attn_every_n_layers=2, attention_dropout=0.1,
                                  pad_token_id=pad, cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3)
    elif arch == "llama":  # causal, rotary, 2 key/value heads for 4 query heads
        config = LlamaConfig(**sizes, num_key_value_heads=max(1, heads // 2), attention_dropout=0.1, pad_token_id=pad)
    elif arch == "qwen2":  # causal, biased Q/K/V, layer 0 full and layer 1 a sliding window of 4 keys, 1 kv head
        config = Qwen2Config(**sizes, num_key_value_heads=1, attention_dropout=0.1, pad_token_id=pad,
                             use_sliding_window=True, sliding_window=4, max_window_layers=1)
    elif arch == "gpt2":  # causal, learned absolute positions, fused c_attn
        config = GPT2Config(vocab_size=vocab_size, n_embd=hidden, n_layer=layers, n_head=heads, n_positions=128,
                            n_inner=2 * hidden + 3, attn_pdrop=0.1, resid_pdrop=0.1, embd_pdrop=0.1,
                            initializer_range=init_std, pad_token_id=pad, bos_token_id=1, eos_token_id=1)
    elif arch == "bert":
        config = BertConfig(**common)
    elif arch == "roberta":
        config = RobertaConfig(**common)
    elif arch == "electra":
        config = ElectraConfig(embedding_size=hidden, **common)
    else:
        cls = DebertaConfig if arch == "deberta" else DebertaV2Config
        extra = {"position_buckets": 16} if arch == "deberta-v2" else {}
        config = cls(relative_attention=True, pos_att_type=["c2p", "p2c"], max_relative_positions=-1,
                     position_biased_input=False, **extra, **common)
    torch.manual_seed(seed)
    kwargs = {"attn_implementation": attn_implementation} if attn_implementation else {}
    if lm_head:
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM.from_config(config, **kwargs).to(TEST_DEVICE).eval()
    return AutoModel.from_config(config, **kwargs).to(TEST_DEVICE).eval()


@pytest.fixture(scope="session")
def minilm():
    """The real offline default model (all-MiniLM-L6-v2) and its tokenizer, loaded once."""
    from papa.method.models import load_model

    return load_model(device=TEST_DEVICE)


@pytest.fixture
def minilm_model(minilm):
    """The shared MiniLM, detached again after the test whatever the test attached."""
    import papa

    model, _ = minilm
    yield model
    papa.detach(model)


@pytest.fixture(params=ARCHS)
def arch(request) -> str:
    return request.param


@pytest.fixture
def tiny(arch):
    """(model, tokenizer) of one architecture; parametrised over all five."""
    return tiny_model(arch), tiny_tokenizer(arch)


@pytest.fixture
def tiny_dir(tmp_path):
    """A 2-layer x 4-head BERT saved in a folder as a downloaded model is (`tiny-bert`): 8 heads, so 1/16 of them
    rounds down to 0."""
    path = tmp_path / "tiny-bert"
    tiny_model("bert", layers=2, heads=4).save_pretrained(path)
    tiny_tokenizer("bert").save_pretrained(path)
    return path
