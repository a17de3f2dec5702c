"""How long the explorer takes to redraw at n = 512: the grid of every head, the head view, a new sentence.

    python -m tests.explorer_redraw                       # MiniLM (72 heads), a random BERT-base (144)
    python -m tests.explorer_redraw --models bert-large   # 384 heads
    python -m tests.explorer_redraw --browser             # also the grid's drawing in headless Chromium

Each model gets average constants at n = 512 from a few long texts (WikiText paragraphs when PAPA_DATA_DIR is set,
else a repeated sentence), then `papa.sections.explorer.HeadExplorer` is timed on a short sentence and on a text that
fills all 512 slots, calling what a widget change calls (medians of `--repeats`):

* new sentence: its live attention, the grid's thumbnails and the head view (what typing a sentence costs);
* grid, sentence scope / all slots: the thumbnails of every head (cropped to the sentence, or the whole n × n
  matrix pooled to 40 × 40) and the bytes sent to the browser;
* head view (a click on a thumbnail or a menu): the head's crop and its two heatmaps;
* slider: k heads replaced, one forward pass (cached per sentence and k afterwards).

With `--browser`, head_grid.js draws the same bytes in the system Chromium (Playwright) and the time of one full
redraw of the grid's canvases is reported. Prints a Markdown table (and writes it as JSON with `--json`);
docs/explorer.md quotes its numbers.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

from papa.method.architectures import model_signature
from papa.method.extract import extract_constants
from papa.method.rankings import HeadRanking
from papa.sections import explorer as explorer_module
from papa.sections.explorer import GRID_SCOPES, HeadExplorer, find_artifacts
from papa.tasks.corpus import Corpus

N = 512
SHORT = "the movie was not good , but the actors were wonderful ."


def texts(count: int) -> list[str]:
    """Texts longer than 512 tokens: consecutive WikiText paragraphs from the data directory joined, else one
    sentence repeated."""
    data = os.environ.get("PAPA_DATA_DIR")
    path = Path(data) / "wikitext" / "wiki.valid.raw" if data else None
    if path is None or not path.is_file():
        return [" ".join([SHORT] * 60)] * count
    out, current = [], []
    for paragraph in (p.strip() for p in path.read_text().split("\n")):
        if paragraph and not paragraph.startswith("="):
            current.append(paragraph)
            if sum(len(p.split()) for p in current) > 600:
                out.append(" ".join(current))
                current = []
                if len(out) == count:
                    break
    return out


def model_for(name: str):
    """(label, model, tokenizer): the offline MiniLM, or a random BERT-base/large with MiniLM's tokenizer."""
    from papa.method.models import load_model

    model, tok = load_model()
    if name == "minilm":
        return "MiniLM-L6 (6 × 12)", model, tok
    from transformers import BertConfig, BertModel

    sizes = {"bert-base": (12, 12, 768), "bert-large": (24, 16, 1024)}[name]
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tok.vocab_size, num_hidden_layers=sizes[0], num_attention_heads=sizes[1],
                        hidden_size=sizes[2], intermediate_size=4 * sizes[2], max_position_embeddings=512)
    label = {"bert-base": "BERT-base", "bert-large": "BERT-large"}[name]
    return f"{label} (random, {sizes[0]} × {sizes[1]})", BertModel(config).eval(), tok


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_model(name: str, folder: Path, repeats: int, corpus_size: int) -> list[dict]:
    label, model, tok = model_for(name)
    model_name = f"bench/{name}"
    constants = extract_constants(model, tok, Corpus("wikitext", texts(corpus_size)), max_length=N,
                                  model_name=model_name, progress=False)
    constants.save(folder / name / "constants.safetensors")
    L, H = constants.num_layers, constants.num_heads
    lambdas = torch.rand(L, H, generator=torch.Generator().manual_seed(0)) * 0.98 + 0.01
    HeadRanking.from_lambdas(lambdas, signature=model_signature(model, model_name), task="wikitext", max_length=N,
                             layout=constants.metadata.layout).save(folder / name / "ranking.safetensors")
    explorer = HeadExplorer(find_artifacts(folder / name), text=SHORT, loader=lambda _: (model, tok))
    long_text = texts(1)[0]
    rows = []
    for which, text in (("short sentence", SHORT), ("512-slot text", long_text)):
        def new_sentence():
            explorer._sentences.clear()
            explorer._grid_key = None
            explorer.text.value = text  # the observer renders (first time); force a full render every round
            explorer.render()

        t_sentence = median_time(new_sentence, repeats)
        slots = len(explorer._sentence(text).slots)
        grid = {}
        for scope in GRID_SCOPES:
            explorer.scope.value = scope

            def redraw():
                explorer._grid_key = None
                explorer.draw_grid(text)

            grid[scope] = median_time(redraw, repeats)
            grid[scope + " bytes"] = len(explorer.grid.pixels)
        explorer.scope.value = GRID_SCOPES[0]
        heads = iter([(layer, head) for layer in range(L) for head in range(H)][1::max(1, (L * H) // 50)])

        def click():
            explorer.grid.selected = list(next(heads))  # as a click does: the menus follow, the head view redraws

        t_head = median_time(click, repeats)

        def slider():
            explorer._sentence(text).similarity.clear()
            explorer._similarity(explorer._sentence(text), (L * H) // 2)

        t_slider = median_time(slider, repeats)
        rows.append({"model": label, "input": f"{which} ({slots} tokens)", "new sentence": t_sentence,
                     "grid, sentence scope": grid["sentence"], "grid, all slots": grid["all slots"],
                     "head view (click)": t_head, "slider (half replaced)": t_slider,
                     "bytes sent (sentence / all slots)": f"{grid['sentence bytes'] // 1024} / "
                                                          f"{grid['all slots bytes'] // 1024} KiB",
                     "_pixels": explorer.grid.pixels, "_shape": (L, H, explorer.grid.size)})
    return rows


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # the table is the output, not each request
        pass


def browser_draw_times(rows: list[dict], repeats: int) -> None:
    """Time head_grid.js drawing each row's thumbnails in headless Chromium (adds 'grid drawn in browser')."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if chromium is None:
        print("no chromium: browser drawing not timed", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(Path(explorer_module.__file__).with_name("head_grid.js"), tmp)
        Path(tmp, "index.html").write_text("<!doctype html><div id=el></div>")
        handler = functools.partial(_QuietHandler, directory=tmp)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
                page = browser.new_page()
                page.goto(f"http://127.0.0.1:{server.server_address[1]}/index.html")
                for row in rows:
                    layers, heads, size = row["_shape"]
                    row["grid drawn in browser"] = page.evaluate(
                        """async ([b64, layers, heads, size, repeats]) => {
                            const grid = (await import('./head_grid.js')).default;
                            const raw = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
                            const listeners = {};
                            const state = {layers, heads, size, pixels: new DataView(raw.buffer),
                                           captions: Array(layers * heads).fill('λ 0.50'), selected: [0, 0]};
                            const model = {get: k => state[k], set: (k, v) => { state[k] = v; },
                                           save_changes: () => {}, on: (e, f) => { listeners[e] = f; }, off: () => {}};
                            const el = document.getElementById('el');
                            el.replaceChildren();
                            grid.render({model, el});
                            const times = [];
                            for (let i = 0; i < repeats; i++) {
                                const t0 = performance.now();
                                listeners['change:pixels']();
                                el.getBoundingClientRect();  // layout included
                                times.push(performance.now() - t0);
                            }
                            times.sort((a, b) => a - b);
                            return times[Math.floor(times.length / 2)] / 1000;
                        }""", [__import__("base64").b64encode(row["_pixels"]).decode(), layers, heads, size, repeats])
                browser.close()
        finally:
            server.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=["minilm", "bert-base"],
                        choices=["minilm", "bert-base", "bert-large"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--corpus-size", type=int, default=8, help="texts averaged into the constants")
    parser.add_argument("--browser", action="store_true", help="also time the grid's drawing in headless Chromium")
    parser.add_argument("--json", default=None, help="write the rows here")
    parser.add_argument("--threads", type=int, default=2,
                        help="torch threads (default 2; on a machine shared with other jobs 1 is much faster)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            rows += bench_model(name, Path(tmp), args.repeats, args.corpus_size)
    if args.browser:
        browser_draw_times(rows, args.repeats)
    columns = [c for c in rows[0] if not c.startswith("_")]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# explorer redraw at n = {N} ({os.cpu_count()} CPUs, load average {load:.1f}, "
          f"{torch.get_num_threads()} torch threads, medians of {args.repeats})\n")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        cells = [f"{row[c] * 1000:.0f} ms" if isinstance(row[c], float) else str(row[c]) for c in columns]
        print("| " + " | ".join(cells) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps([{k: v for k, v in r.items() if not k.startswith("_")} for r in rows],
                                              indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
