// Small DOM and formatting helpers shared by the views. Text always goes in as text nodes,
// never as HTML, so nothing the server or a file name holds can run as markup.

export function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "class") element.className = value;
    else if (value === true) element.setAttribute(name, "");
    else element.setAttribute(name, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

// A count with thousands separators: 1,234,567.
export function formatCount(count) {
  return Number(count).toLocaleString("en-US");
}

export function formatBytes(bytes) {
  if (bytes === null || bytes === undefined) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${formatCount(bytes)} B` : `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

export function formatTime(iso) {
  if (!iso) return "";
  return new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

// The API's refusals in words a person can act on, with the server's own message beside.
const WORDS = {
  400: "The request was not accepted",
  401: "The key is not valid (unknown, revoked or expired)",
  402: "Over the plan's quota",
  403: "This key is not allowed to do that",
  404: "Not found",
  408: "The upload took longer than the bucket's deadline and was cancelled",
  409: "Conflict",
  413: "Too large for this bucket's size limit",
  415: "This bucket does not accept files of this type",
  429: "Too many requests",
  503: "Storage is unavailable for a moment",
};

export function explain(error) {
  if (!error || error.status === undefined) return String(error);
  if (error.status === 0) return "The server could not be reached";
  let words = WORDS[error.status] || (error.status >= 500 ? "The server failed" : "Refused");
  if (error.status === 429 && error.headers && error.headers["retry-after"]) {
    words += `: try again in ${error.headers["retry-after"]} s`;
  }
  return `${words}. ${error.message} (${error.status} ${error.code})`;
}

// A message in the page's live region, read out by screen readers.
export function announce(text, kind = "info") {
  const region = document.getElementById("announcer");
  region.textContent = "";
  region.className = `announcer ${kind}`;
  region.append(text);
  region.hidden = !text;
}

export function errorBox(error) {
  return h("p", { class: "error", role: "alert" }, explain(error));
}

// A modal dialog that resolves with the button pressed ("ok" or "cancel").
export function confirmDialog({ title, body, ok = "OK", danger = false }) {
  return new Promise((resolve) => {
    const dialog = h(
      "dialog",
      { class: "dialog", "aria-labelledby": "dialog-title" },
      h("h2", { id: "dialog-title" }, title),
      h("p", {}, body),
      h(
        "form",
        { method: "dialog", class: "actions" },
        h("button", { value: "cancel", type: "submit" }, "Cancel"),
        h("button", { value: "ok", type: "submit", class: danger ? "danger" : "primary" }, ok),
      ),
    );
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(dialog.returnValue === "ok" ? "ok" : "cancel");
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

// A table cell of row actions (a flex box inside the cell keeps the table's layout).
export function actionsCell(...buttons) {
  return h("td", {}, h("div", { class: "actions" }, ...buttons));
}

export function badge(status) {
  return h("span", { class: `badge ${status}` }, status);
}

export function field(label, input, hint) {
  const id = input.id || `f-${Math.random().toString(36).slice(2)}`;
  input.id = id;
  return h(
    "div",
    { class: "field" },
    h("label", { for: id }, label),
    input,
    hint ? h("small", {}, hint) : null,
  );
}

export function progressBar(label) {
  const bar = h("progress", { max: 100, value: 0, "aria-label": label });
  return bar;
}

export function basename(key) {
  const parts = key.split("/");
  return parts[parts.length - 1] || key;
}

export function saveBlob(blob, name) {
  const url = URL.createObjectURL(blob);
  const link = h("a", { href: url, download: name });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

// A modal dialog asking for one value; resolves with it, or null when cancelled.
export function promptDialog(title, label, value) {
  return new Promise((resolve) => {
    const input = h("input", { name: "value", value, required: true, spellcheck: "false" });
    const dialog = h(
      "dialog",
      { class: "dialog", "aria-labelledby": "prompt-title" },
      h(
        "form",
        { method: "dialog" },
        h("h2", { id: "prompt-title" }, title),
        field(label, input),
        h(
          "div",
          { class: "actions" },
          h("button", { value: "cancel", type: "submit", formnovalidate: true }, "Cancel"),
          h("button", { value: "ok", type: "submit", class: "primary" }, "Save"),
        ),
      ),
    );
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(dialog.returnValue === "ok" ? input.value : null);
    });
    document.body.append(dialog);
    dialog.showModal();
    input.select();
  });
}
