// The explorer's grid of every layer x head (papa.sections.explorer.HeadGrid, an anywidget): one small canvas per head,
// drawn from the RGBA thumbnails Python sends as bytes; a click sends the head back as `selected`.
function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "papa-grid";
  el.appendChild(root);

  const label = (text, cls) => {
    const span = document.createElement("span");
    span.className = cls;
    span.textContent = text;
    return span;
  };

  const highlight = () => {
    const [layer, head] = model.get("selected");
    for (const cell of root.querySelectorAll(".papa-head")) {
      const on = Number(cell.dataset.layer) === layer && Number(cell.dataset.head) === head;
      cell.classList.toggle("papa-selected", on);
      cell.setAttribute("aria-pressed", on ? "true" : "false");
    }
  };

  const draw = () => {
    const layers = model.get("layers"), heads = model.get("heads"), size = model.get("size");
    const view = model.get("pixels");
    const rgba = new Uint8ClampedArray(view.buffer, view.byteOffset, view.byteLength);
    const captions = model.get("captions");
    // About 600 px across whatever the head count (12 heads: 50 px thumbnails, 16: 37 px), so that the head view
    // fits beside the grid on a 1400 px window.
    const px = Math.max(18, Math.min(56, Math.floor(600 / Math.max(heads, 1))));
    root.replaceChildren();
    root.style.gridTemplateColumns = `auto repeat(${heads}, ${px}px)`;
    root.append(label("", "papa-axis"));
    for (let h = 0; h < heads; h++) root.append(label(`H${h}`, "papa-axis"));
    const step = size * size * 4;
    for (let l = 0; l < layers; l++) {
      root.append(label(`L${l}`, "papa-axis"));
      for (let h = 0; h < heads; h++) {
        const i = l * heads + h;
        const cell = document.createElement("button");
        cell.type = "button";
        cell.className = "papa-head";
        cell.dataset.layer = String(l);
        cell.dataset.head = String(h);
        cell.title = `layer ${l}, head ${h}` + (captions[i] ? ` · ${captions[i]}` : "");
        const canvas = document.createElement("canvas");
        canvas.width = canvas.height = size;
        canvas.style.width = canvas.style.height = `${px - 4}px`;
        if (size > 0 && rgba.length >= (i + 1) * step) {
          canvas.getContext("2d").putImageData(new ImageData(rgba.slice(i * step, (i + 1) * step), size, size), 0, 0);
        }
        cell.append(canvas);
        if (captions[i]) cell.append(label(captions[i], "papa-caption"));
        cell.addEventListener("click", () => {
          model.set("selected", [l, h]);
          model.save_changes();
          // on a narrow window the head view sits below the grid: bring it into sight (no move where beside it)
          const box = el.closest(".widget-hbox");
          const view = box && box.querySelector("img.widget-image");
          if (view) view.scrollIntoView({ block: "nearest" });
        });
        root.append(cell);
      }
    }
    highlight();
  };

  draw();
  model.on("change:pixels", draw);
  model.on("change:captions", draw);
  model.on("change:selected", highlight);
  return () => {
    model.off("change:pixels", draw);
    model.off("change:captions", draw);
    model.off("change:selected", highlight);
  };
}

export default { render };
