// A bucket as folders: `delimiter=/` listings with breadcrumbs, "load more" along nextCursor,
// a filter by name (a longer prefix, asked of the server), new folders (an empty object
// named `folder/`, as S3's console makes them), uploads by picker or drag-and-drop with a
// progress bar each, several files deleted at once, and a details panel.

import { api, upload } from "./api.js";
import { encryptionRows } from "./encryption.js";
import { fileSharing } from "./sharing.js";
import { versionsPanel } from "./versions.js";
import {
  actionsCell,
  announce,
  basename,
  confirmDialog,
  errorBox,
  explain,
  field,
  formatBytes,
  formatCount,
  formatTime,
  h,
  progressBar,
  promptDialog,
  saveBlob,
} from "./ui.js";

const PREVIEW_BYTES = 64 * 1024;
const FOLDER_TYPE = "application/x-directory";
const FILTER_DELAY_MS = 250;
const IMAGE_TYPES = /^image\/(png|jpeg|gif|webp|avif|bmp)$/;
const TEXT_TYPES = /^(text\/.*|application\/(json|xml|javascript|x-yaml|yaml|toml))$/;

export function folderHref(bucketId, prefix) {
  return `#/buckets/${bucketId}${prefix ? `?prefix=${encodeURIComponent(prefix)}` : ""}`;
}

export function filesView(main, bucketId, prefix) {
  const tbody = h("tbody");
  const status = h("div", { "aria-live": "polite" });
  const more = h("button", { type: "button", hidden: true }, "Load more");
  const details = h("aside", { class: "details", "aria-label": "File details", hidden: true });
  const uploads = h("ul", { class: "uploads", "aria-label": "Uploads" });
  const crumbs = h("nav", { class: "breadcrumbs", "aria-label": "Folder" });
  const title = h("h1", {}, "Files");
  const filter = h("input", { type: "search", id: "file-filter", autocomplete: "off", spellcheck: "false" });
  const selected = new Map();
  const deleteSelected = h(
    "button",
    { type: "button", class: "danger", disabled: true, onclick: () => removeSelected() },
    "Delete selected",
  );
  let cursor = null;
  let versioned = false;

  function noteSelection() {
    deleteSelected.disabled = selected.size === 0;
    deleteSelected.textContent = selected.size ? `Delete ${formatCount(selected.size)} selected` : "Delete selected";
  }

  async function loadPage(reset) {
    more.disabled = true;
    try {
      const page = await api.listFiles(bucketId, prefix + filter.value, reset ? null : cursor);
      if (reset) {
        tbody.replaceChildren();
        selected.clear();
        noteSelection();
      }
      for (const folder of page.meta.prefixes || []) tbody.append(folderRow(folder));
      for (const file of page.data) if (file.key !== prefix) tbody.append(fileRow(file));
      cursor = page.meta.nextCursor;
      more.hidden = !cursor;
      if (reset && tbody.children.length === 0) {
        const empty = filter.value ? "No name here starts so." : "This folder is empty.";
        tbody.append(h("tr", {}, h("td", { colspan: 6 }, empty)));
      }
      status.replaceChildren();
    } catch (error) {
      status.replaceChildren(errorBox(error));
    } finally {
      more.disabled = false;
    }
  }

  function folderRow(folder) {
    const name = folder.slice(prefix.length);
    return h(
      "tr",
      { class: "folder" },
      h("td", {}),
      h("td", {}, h("a", { href: folderHref(bucketId, folder) }, `📁 ${name}`)),
      h("td", { class: "num" }),
      h("td", {}, "folder"),
      h("td", {}),
      h("td", {}),
    );
  }

  function fileRow(file) {
    const name = file.key.slice(prefix.length);
    const pick = h("input", { type: "checkbox", "aria-label": `Select ${name}` });
    pick.addEventListener("change", () => {
      if (pick.checked) selected.set(file.key, file);
      else selected.delete(file.key);
      noteSelection();
    });
    return h(
      "tr",
      { "data-key": file.key },
      h("td", { class: "select" }, pick),
      h(
        "td",
        {},
        h(
          "button",
          { type: "button", class: "link", onclick: () => showDetails(file) },
          name,
        ),
      ),
      h("td", { class: "num" }, formatBytes(file.size)),
      h("td", {}, file.contentType),
      h("td", {}, formatTime(file.uploadedAt)),
      actionsCell(
        h(
          "button",
          { type: "button", "aria-label": `Download ${name}`, onclick: () => download(file) },
          "Download",
        ),
        h(
          "button",
          { type: "button", "aria-label": `Rename ${name}`, onclick: () => rename(file) },
          "Rename",
        ),
        h(
          "button",
          {
            type: "button",
            class: "danger",
            "aria-label": `Delete ${name}`,
            onclick: () => remove(file),
          },
          "Delete",
        ),
      ),
    );
  }

  async function download(file) {
    try {
      saveBlob(await api.download(bucketId, file.key), basename(file.key));
    } catch (error) {
      announce(explain(error), "error");
    }
  }

  async function rename(file) {
    const newKey = await promptDialog(`Rename ${basename(file.key)}`, "New key", file.key);
    if (!newKey || newKey === file.key) return;
    try {
      await api.updateFile(bucketId, file.key, { key: newKey });
      announce(`Renamed to ${newKey}.`);
      details.hidden = true;
      await loadPage(true);
    } catch (error) {
      announce(explain(error), "error");
    }
  }

  async function remove(file) {
    const answer = await confirmDialog({
      title: `Delete ${basename(file.key)}?`,
      body: versioned
        ? `${file.key} will be hidden by a delete marker; every version of it stays.`
        : `${file.key} (${formatBytes(file.size)}) will be deleted. This cannot be undone.`,
      ok: "Delete",
      danger: true,
    });
    if (answer !== "ok") return;
    try {
      await api.deleteFile(bucketId, file.key);
      announce(`Deleted ${file.key}.`);
      details.hidden = true;
      await loadPage(true);
    } catch (error) {
      announce(explain(error), "error");
    }
  }

  async function removeSelected() {
    const files = [...selected.values()];
    const count = formatCount(files.length);
    const answer = await confirmDialog({
      title: `Delete ${count} file${files.length === 1 ? "" : "s"}?`,
      body: `${files.map((file) => file.key).join(", ")}${
        versioned ? " will be hidden by delete markers; every version stays." : " will be deleted. This cannot be undone."
      }`,
      ok: `Delete ${count}`,
      danger: true,
    });
    if (answer !== "ok") return;
    const failed = [];
    for (const file of files) {
      try {
        await api.deleteFile(bucketId, file.key);
      } catch (error) {
        failed.push(`${file.key}: ${explain(error)}`);
      }
    }
    const done = files.length - failed.length;
    announce(
      failed.length ? `Deleted ${formatCount(done)}; not ${failed.join("; ")}` : `Deleted ${count} files.`,
      failed.length ? "error" : undefined,
    );
    details.hidden = true;
    await loadPage(true);
  }

  async function newFolder() {
    const name = await promptDialog("New folder", "Folder name", "");
    const cleaned = (name || "").replace(/^\/+|\/+$/g, "");
    if (!cleaned) return;
    const key = `${prefix}${cleaned}/`;
    try {
      await upload(bucketId, key, new Blob([], { type: FOLDER_TYPE }), () => {});
      announce(`Folder ${cleaned} made.`);
      location.hash = folderHref(bucketId, key);
    } catch (error) {
      announce(explain(error), "error");
    }
  }

  async function showDetails(file) {
    const preview = h("div", { class: "preview" });
    details.replaceChildren(
      h("h2", {}, basename(file.key)),
      h(
        "dl",
        {},
        h("dt", {}, "Key"),
        h("dd", {}, file.key),
        h("dt", {}, "Size"),
        h("dd", {}, `${formatBytes(file.size)} (${formatCount(file.size)} bytes)`),
        h("dt", {}, "Type"),
        h("dd", {}, file.contentType),
        h("dt", {}, "Uploaded"),
        h("dd", {}, formatTime(file.uploadedAt)),
        h("dt", {}, "ETag"),
        h("dd", { class: "etag" }, file.etag),
        versioned ? h("dt", {}, "Version") : null,
        versioned ? h("dd", { class: "etag" }, versionLabel(file.versionId)) : null,
        ...encryptionRows(file),
        ...tagRows(file.tags || {}),
      ),
      preview,
      fileSharing(bucketId, file, () => loadPage(true)),
      versioned ? versionsPanel(bucketId, file.key, () => loadPage(true)) : null,
      h(
        "button",
        { type: "button", onclick: () => (details.hidden = true) },
        "Close details",
      ),
    );
    details.hidden = false;
    details.querySelector("h2").setAttribute("tabindex", "-1");
    details.querySelector("h2").focus();
    if (file.encryption === "SSE-C") return; // only the S3 endpoint, given its key, reads it
    try {
      if (IMAGE_TYPES.test(file.contentType)) {
        const url = URL.createObjectURL(await api.download(bucketId, file.key));
        preview.replaceChildren(h("img", { src: url, alt: `Preview of ${file.key}` }));
      } else if (TEXT_TYPES.test(file.contentType) && file.size > 0) {
        const bytes = await api.head(bucketId, file.key, Math.min(PREVIEW_BYTES, file.size));
        const text = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
        preview.replaceChildren(
          h("pre", { "aria-label": `Preview of ${file.key}` }, text),
          file.size > PREVIEW_BYTES ? h("small", {}, "The first 64 KiB.") : null,
        );
      }
    } catch (error) {
      preview.replaceChildren(errorBox(error));
    }
  }

  function uploadFiles(fileList) {
    const files = Array.from(fileList);
    return Promise.all(files.map(uploadOne)).then(() => loadPage(true));
  }

  async function uploadOne(file) {
    const key = prefix + file.name;
    const bar = progressBar(`Upload of ${file.name}`);
    const state = h("span", { class: "state" }, "uploading");
    const item = h("li", { "data-upload": file.name }, h("span", {}, file.name), bar, state);
    uploads.append(item);
    try {
      await upload(bucketId, key, file, (sent, total) => {
        bar.value = total ? Math.round((sent / total) * 100) : 100;
      });
      bar.value = 100;
      state.textContent = "done";
      item.classList.add("done");
    } catch (error) {
      state.replaceChildren(errorBox(error));
      item.classList.add("failed");
    }
  }

  const picker = h("input", { type: "file", multiple: true, id: "file-picker" });
  picker.addEventListener("change", () => {
    uploadFiles(picker.files);
    picker.value = "";
  });
  const drop = h(
    "div",
    { class: "dropzone", id: "dropzone" },
    h("p", {}, "Drop files here to upload them into this folder, or "),
    field("Choose files", picker),
  );
  drop.addEventListener("dragover", (event) => {
    event.preventDefault();
    drop.classList.add("over");
  });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (event) => {
    event.preventDefault();
    drop.classList.remove("over");
    if (event.dataTransfer && event.dataTransfer.files.length) uploadFiles(event.dataTransfer.files);
  });
  more.addEventListener("click", () => loadPage(false));
  let filtering = null;
  filter.addEventListener("input", () => {
    clearTimeout(filtering);
    filtering = setTimeout(() => loadPage(true), FILTER_DELAY_MS);
  });

  main.replaceChildren(
    title,
    crumbs,
    drop,
    uploads,
    h(
      "div",
      { class: "toolbar" },
      field("Filter by name", filter, "names in this folder that start so"),
      h("button", { type: "button", onclick: () => newFolder() }, "New folder"),
      deleteSelected,
    ),
    status,
    h(
      "div",
      { class: "files-layout" },
      h(
        "div",
        { class: "table-wrap" },
        h(
          "table",
          { class: "list", "aria-label": "Files" },
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              h("th", { scope: "col" }, h("span", { class: "visually-hidden" }, "Select")),
              h("th", { scope: "col" }, "Name"),
              h("th", { scope: "col", class: "num" }, "Size"),
              h("th", { scope: "col" }, "Type"),
              h("th", { scope: "col" }, "Uploaded"),
              h("th", { scope: "col" }, h("span", { class: "visually-hidden" }, "Actions")),
            ),
          ),
          tbody,
        ),
        more,
      ),
      details,
    ),
  );

  api.getBucket(bucketId).then(
    (bucket) => {
      title.textContent = bucket.name;
      versioned = bucket.versioning !== null;
      crumbs.replaceChildren(...breadcrumbs(bucket, prefix));
    },
    (error) => status.replaceChildren(errorBox(error)),
  );
  loadPage(true);
  return () => {};
}

function breadcrumbs(bucket, prefix) {
  const items = [h("li", {}, h("a", { href: "#/buckets" }, "Buckets"))];
  const parts = prefix.split("/").filter((_, i, all) => i < all.length - 1);
  items.push(
    h(
      "li",
      {},
      parts.length
        ? h("a", { href: folderHref(bucket.id, "") }, bucket.name)
        : h("span", { "aria-current": "page" }, bucket.name),
    ),
  );
  let path = "";
  parts.forEach((part, index) => {
    path += `${part}/`;
    const last = index === parts.length - 1;
    items.push(
      h(
        "li",
        {},
        last
          ? h("span", { "aria-current": "page" }, part)
          : h("a", { href: folderHref(bucket.id, path) }, part),
      ),
    );
  });
  return [h("ol", {}, items)];
}

function tagRows(tags) {
  const names = Object.keys(tags).sort();
  if (names.length === 0) {
    return [];
  }
  return [h("dt", {}, "Tags"), h("dd", {}, names.map((name) => `${name}=${tags[name]}`).join(", "))];
}

// S3 calls the version of a file written while versioning was off "null": say what it is.
function versionLabel(versionId) {
  return versionId && versionId !== "null" ? versionId : "none (written while versioning was off)";
}
