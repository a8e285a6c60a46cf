// A file's version history in its details panel: every version and delete marker, newest
// first, each downloadable; an older version can be restored (it becomes current again) or
// deleted for good.

import { allPages, api } from "./api.js";
import {
  actionsCell,
  announce,
  basename,
  confirmDialog,
  errorBox,
  explain,
  formatBytes,
  formatTime,
  h,
  saveBlob,
} from "./ui.js";

export function versionsPanel(bucketId, key, onChange) {
  const tbody = h("tbody");
  const status = h("div", { "aria-live": "polite" });
  const panel = h(
    "section",
    { class: "versions", "aria-label": `Versions of ${key}` },
    h("h3", {}, "Versions"),
    status,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "list", "aria-label": `Versions of ${key}` },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col" }, "Uploaded"),
            h("th", { scope: "col", class: "num" }, "Size"),
            h("th", { scope: "col" }, h("span", { class: "visually-hidden" }, "Actions")),
          ),
        ),
        tbody,
      ),
    ),
  );

  function lockBadges(version) {
    const badges = [];
    if (version.retention) {
      const until = formatTime(version.retention.retainUntil);
      badges.push(h("span", { class: "badge lock" }, `${version.retention.mode} until ${until}`));
    }
    if (version.legalHold) {
      badges.push(h("span", { class: "badge lock" }, "legal hold"));
    }
    return badges;
  }

  function row(version) {
    const when = formatTime(version.uploadedAt);
    const what = version.deleteMarker ? "delete marker" : formatBytes(version.size);
    const buttons = [];
    if (!version.deleteMarker) {
      buttons.push(
        h(
          "button",
          { type: "button", "aria-label": `Download the version of ${when}`, onclick: () => download(version) },
          "Download",
        ),
      );
      if (!version.isLatest) {
        buttons.push(
          h(
            "button",
            { type: "button", "aria-label": `Restore the version of ${when}`, onclick: () => restore(version) },
            "Restore",
          ),
        );
      }
    }
    buttons.push(
      h(
        "button",
        {
          type: "button",
          class: "danger",
          "aria-label": `Delete the ${version.deleteMarker ? "delete marker" : "version"} of ${when} for good`,
          onclick: () => remove(version),
        },
        "Delete",
      ),
    );
    return h(
      "tr",
      { "data-version": version.versionId, class: version.isLatest ? "latest" : "" },
      h(
        "td",
        {},
        when,
        version.isLatest ? h("span", { class: "badge" }, "current") : null,
        ...lockBadges(version),
      ),
      h("td", { class: "num" }, what),
      actionsCell(...buttons),
    );
  }

  async function load() {
    try {
      const versions = await allPages((cursor) => api.listVersions(bucketId, key, cursor));
      tbody.replaceChildren(...versions.map(row));
      status.replaceChildren();
    } catch (error) {
      status.replaceChildren(errorBox(error));
    }
  }

  async function download(version) {
    try {
      saveBlob(await api.download(bucketId, key, version.versionId), basename(key));
    } catch (error) {
      announce(explain(error), "error");
    }
  }

  async function restore(version) {
    try {
      await api.restoreVersion(bucketId, key, version.versionId);
      announce(`Restored the version of ${formatTime(version.uploadedAt)}.`);
      await load();
      onChange();
    } catch (error) {
      announce(explain(error), "error");
    }
  }

  async function remove(version) {
    const answer = await confirmDialog({
      title: version.deleteMarker ? "Delete this delete marker?" : "Delete this version for good?",
      body: version.deleteMarker
        ? `The newest version before it becomes current again.`
        : `The version of ${formatTime(version.uploadedAt)} (${formatBytes(version.size)}) will be deleted. This cannot be undone.`,
      ok: "Delete",
      danger: true,
    });
    if (answer !== "ok") return;
    try {
      await api.deleteFile(bucketId, key, version.versionId);
      announce("Deleted the version.");
      await load();
      onChange();
    } catch (error) {
      announce(explain(error), "error");
    }
  }

  load();
  return panel;
}
