// A bucket's snapshots in its settings: take one (with an optional label), and for each
// restore the bucket to it, fork it into a new bucket, or delete it. A snapshot copies no
// content, so taking one is quick whatever the bucket holds.

import { allPages, api } from "./api.js";
import {
  actionsCell,
  announce,
  confirmDialog,
  errorBox,
  explain,
  field,
  formatBytes,
  formatCount,
  formatTime,
  h,
} from "./ui.js";

function versions(count) {
  return `${formatCount(count)} version${count === 1 ? "" : "s"}`;
}

export function snapshotsPanel(bucket, onRestored) {
  const tbody = h("tbody");
  const status = h("div", { "aria-live": "polite" });
  const forkArea = h("div");
  const label = h("input", { name: "snapshotName", autocomplete: "off", maxlength: 256 });
  const message = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    { class: "inline-form", "aria-label": "Take a snapshot" },
    field("Snapshot label", label, "optional, to recognise it by"),
    h("button", { type: "submit", class: "primary" }, "Take snapshot"),
    message,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    message.replaceChildren();
    try {
      const made = await api.createSnapshot(bucket.id, label.value.trim() || null);
      announce(`Snapshot taken: ${versions(made.fileCount)}, ${formatBytes(made.sizeBytes)}.`);
      label.value = "";
      await load();
    } catch (error) {
      message.replaceChildren(errorBox(error));
    }
  });

  function title(snapshot) {
    return snapshot.name || formatTime(snapshot.createdAt);
  }

  function row(snapshot) {
    const named = title(snapshot);
    return h(
      "tr",
      { "data-snapshot": snapshot.id },
      h("td", {}, formatTime(snapshot.createdAt)),
      h("td", {}, snapshot.name || ""),
      h("td", { class: "num" }, formatCount(snapshot.fileCount)),
      h("td", { class: "num" }, formatBytes(snapshot.sizeBytes)),
      actionsCell(
        h(
          "button",
          { type: "button", "aria-label": `Restore snapshot ${named}`, onclick: () => restore(snapshot) },
          "Restore",
        ),
        h(
          "button",
          { type: "button", "aria-label": `Fork snapshot ${named}`, onclick: () => showFork(snapshot) },
          "Fork",
        ),
        h(
          "button",
          {
            type: "button",
            class: "danger",
            "aria-label": `Delete snapshot ${named}`,
            onclick: () => remove(snapshot),
          },
          "Delete",
        ),
      ),
    );
  }

  async function load() {
    try {
      const found = await allPages((cursor) => api.listBucketSnapshots(bucket.id, cursor));
      tbody.replaceChildren(...found.map(row));
      if (found.length === 0) {
        tbody.append(h("tr", {}, h("td", { colspan: 5 }, "No snapshots yet.")));
      }
      status.replaceChildren();
    } catch (error) {
      status.replaceChildren(errorBox(error));
    }
  }

  async function restore(snapshot) {
    const answer = await confirmDialog({
      title: `Restore ${bucket.name} to ${title(snapshot)}?`,
      body: `The bucket gets back exactly the ${versions(snapshot.fileCount)} and the settings it had then; files written since are deleted and uploads in progress aborted.`,
      ok: "Restore",
      danger: true,
    });
    if (answer !== "ok") return;
    try {
      const restored = await api.restoreSnapshot(snapshot.id);
      announce(`Restored ${restored.name}: ${versions(restored.fileCount)}.`);
      onRestored(restored);
    } catch (error) {
      announce(explain(error), "error");
    }
  }

  function showFork(snapshot) {
    const name = h("input", { name: "forkName", required: true, autocomplete: "off", spellcheck: "false" });
    const result = h("div", { "aria-live": "polite" });
    const fork = h(
      "form",
      { class: "inline-form", "aria-label": `Fork snapshot ${title(snapshot)}` },
      field("New bucket name", name, "the fork shares the snapshot's content: nothing is copied"),
      h("button", { type: "submit", class: "primary" }, "Create fork"),
      result,
    );
    fork.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        const made = await api.forkSnapshot(snapshot.id, name.value.trim());
        result.replaceChildren(
          h("p", { class: "ok", role: "status" }, "Forked into ", h("a", { href: `#/buckets/${made.id}` }, made.name), "."),
        );
      } catch (error) {
        result.replaceChildren(errorBox(error));
      }
    });
    forkArea.replaceChildren(fork);
    name.focus();
  }

  async function remove(snapshot) {
    const answer = await confirmDialog({
      title: `Delete snapshot ${title(snapshot)}?`,
      body: "The bucket is not changed; content only this snapshot still holds is deleted with it.",
      ok: "Delete",
      danger: true,
    });
    if (answer !== "ok") return;
    try {
      await api.deleteSnapshot(snapshot.id);
      announce("Snapshot deleted.");
      forkArea.replaceChildren();
      await load();
    } catch (error) {
      announce(explain(error), "error");
    }
  }

  load();
  return h(
    "section",
    { "aria-label": "Snapshots" },
    h("h2", {}, "Snapshots"),
    form,
    status,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "list", "aria-label": `Snapshots of ${bucket.name}` },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col" }, "Taken"),
            h("th", { scope: "col" }, "Label"),
            h("th", { scope: "col", class: "num" }, "Versions"),
            h("th", { scope: "col", class: "num" }, "Size"),
            h("th", { scope: "col" }, h("span", { class: "visually-hidden" }, "Actions")),
          ),
        ),
        tbody,
      ),
    ),
    forkArea,
  );
}
