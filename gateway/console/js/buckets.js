// The bucket list (live status badges), creation, settings and deletion.

import { allPages, api } from "./api.js";
import { encryptionFields } from "./encryption.js";
import { sharingFields } from "./sharing.js";
import { snapshotsPanel } from "./snapshots.js";
import { webhooksPanel } from "./webhooks.js";
import {
  actionsCell,
  announce,
  badge,
  confirmDialog,
  errorBox,
  explain,
  field,
  formatBytes,
  formatCount,
  formatTime,
  h,
} from "./ui.js";

const REGIONS = [
  "us-east-1",
  "us-east-2",
  "us-west-1",
  "us-west-2",
  "eu-west-1",
  "eu-west-2",
  "eu-central-1",
  "ap-southeast-1",
  "ap-northeast-1",
  "sa-east-1",
];
const POLL_MS = 1000;

export function bucketsView(main) {
  const tbody = h("tbody");
  const status = h("div", { "aria-live": "polite" });
  let timer = null;
  let stopped = false;

  async function refresh() {
    let buckets;
    try {
      buckets = await allPages((cursor) => api.listBuckets(cursor));
    } catch (error) {
      status.replaceChildren(errorBox(error));
      return;
    }
    status.replaceChildren();
    tbody.replaceChildren(...buckets.map(row));
    if (buckets.length === 0) {
      tbody.append(h("tr", {}, h("td", { colspan: 6 }, "No buckets yet: create one above.")));
    }
    clearTimeout(timer);
    if (!stopped && buckets.some((b) => b.status === "provisioning")) {
      timer = setTimeout(refresh, POLL_MS);
    }
  }

  function row(bucket) {
    return h(
      "tr",
      { "data-bucket": bucket.name },
      h(
        "td",
        {},
        bucket.status === "active"
          ? h("a", { href: `#/buckets/${bucket.id}` }, bucket.name)
          : bucket.name,
      ),
      h("td", {}, badge(bucket.status), bucket.statusReason ? ` ${bucket.statusReason}` : ""),
      h("td", {}, bucket.region),
      h("td", { class: "num" }, formatCount(bucket.fileCount)),
      h("td", { class: "num" }, formatBytes(bucket.sizeBytes)),
      actionsCell(
        h("a", { href: `#/buckets/${bucket.id}/settings`, class: "button" }, "Settings"),
        h(
          "button",
          {
            type: "button",
            class: "danger",
            "aria-label": `Delete bucket ${bucket.name}`,
            onclick: () => removeBucket(bucket, refresh),
          },
          "Delete",
        ),
      ),
    );
  }

  main.replaceChildren(
    h("h1", {}, "Buckets"),
    createForm(refresh),
    status,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "list", "aria-label": "Buckets" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col" }, "Name"),
            h("th", { scope: "col" }, "Status"),
            h("th", { scope: "col" }, "Region"),
            h("th", { scope: "col", class: "num" }, "Files"),
            h("th", { scope: "col", class: "num" }, "Size"),
            h("th", { scope: "col" }, h("span", { class: "visually-hidden" }, "Actions")),
          ),
        ),
        tbody,
      ),
    ),
  );
  refresh();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

function createForm(refresh) {
  const name = h("input", { name: "name", required: true, autocomplete: "off", spellcheck: "false" });
  const region = h(
    "select",
    { name: "region" },
    REGIONS.map((r) => h("option", { value: r }, r)),
  );
  const message = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    { class: "inline-form", "aria-label": "Create a bucket" },
    field("Bucket name", name, "3 to 63 of a-z, 0-9, - and ."),
    field("Region", region),
    h("button", { type: "submit", class: "primary" }, "Create bucket"),
    message,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    message.replaceChildren();
    try {
      const bucket = await api.createBucket({ name: name.value.trim(), region: region.value });
      announce(`Bucket ${bucket.name} created; provisioning.`);
      name.value = "";
      await refresh();
    } catch (error) {
      message.replaceChildren(errorBox(error));
      name.focus();
    }
  });
  return form;
}

async function removeBucket(bucket, refresh) {
  let current = bucket;
  try {
    current = await api.getBucket(bucket.id);
  } catch {
    // deleting will tell
  }
  const files = current.fileCount;
  const answer = await confirmDialog({
    title: `Delete bucket ${current.name}?`,
    body:
      files > 0
        ? `Bucket ${current.name} holds ${formatCount(files)} file${files === 1 ? "" : "s"} (${formatBytes(current.sizeBytes)}). They will be deleted with it. This cannot be undone.`
        : `Bucket ${current.name} is empty. This cannot be undone.`,
    ok: files > 0 ? `Delete ${current.name} and ${formatCount(files)} file${files === 1 ? "" : "s"}` : "Delete",
    danger: true,
  });
  if (answer !== "ok") return;
  try {
    await api.deleteBucket(current.id, files > 0);
    announce(`Bucket ${current.name} deleted.`);
  } catch (error) {
    announce(explain(error), "error");
  }
  await refresh();
}

export function bucketSettingsView(main, bucketId) {
  main.replaceChildren(h("p", {}, "Loading…"));
  api.getBucket(bucketId).then(
    (bucket) =>
      main.replaceChildren(...settingsContent(bucket, () => bucketSettingsView(main, bucketId))),
    (error) => main.replaceChildren(h("h1", {}, "Bucket settings"), errorBox(error)),
  );
}

// `reload`: the page again, as the server now has the bucket (after a snapshot's restore
// changed its files and settings).
function settingsContent(bucket, reload) {
  const name = h("input", { name: "name", value: bucket.name, required: true, spellcheck: "false" });
  const limit = h("input", {
    name: "maxUploadBytes",
    type: "number",
    min: 0,
    step: 1,
    value: bucket.maxUploadBytes,
  });
  const types = h(
    "textarea",
    { name: "allowedContentTypes", rows: 3, spellcheck: "false" },
    bucket.allowedContentTypes.join("\n"),
  );
  const versioning = h(
    "select",
    { name: "versioning" },
    bucket.versioning === null ? h("option", { value: "", selected: true }, "Off") : null,
    h("option", { value: "enabled", selected: bucket.versioning === "enabled" }, "Enabled"),
    h("option", { value: "suspended", selected: bucket.versioning === "suspended" }, "Suspended"),
  );
  const shownRules = bucket.lifecycle ? JSON.stringify(bucket.lifecycle, null, 2) : "";
  const lifecycle = h(
    "textarea",
    { name: "lifecycle", rows: 6, spellcheck: "false", class: "code" },
    shownRules,
  );
  const sharing = sharingFields(bucket);
  const encryption = encryptionFields(bucket);
  const message = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    { class: "stacked-form", "aria-label": "Bucket settings" },
    field("Name", name),
    field(
      "Versioning",
      versioning,
      "enabled keeps every version of every file (each counts in the usage); once on, it can be suspended but not turned off",
    ),
    bucket.objectLock ? h("p", {}, objectLockText(bucket.objectLock)) : null,
    field("Largest file, in bytes", limit, `now ${formatBytes(bucket.maxUploadBytes)}`),
    field(
      "Allowed MIME types",
      types,
      "one per line or separated by commas: image/png, image/*, */* for any",
    ),
    field(
      "Lifecycle rules",
      lifecycle,
      'JSON, e.g. [{"id": "logs", "prefix": "logs/", "expirationDays": 30}]; empty for none (see docs/api.md)',
    ),
    ...sharing.elements,
    ...encryption.elements,
    h(
      "div",
      { class: "actions" },
      h("a", { href: "#/buckets", class: "button" }, "Back to buckets"),
      h("button", { type: "submit", class: "primary" }, "Save"),
    ),
    message,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const changes = {};
    if (name.value.trim() !== bucket.name) changes.name = name.value.trim();
    const bytes = Number(limit.value);
    if (limit.value !== "" && bytes !== bucket.maxUploadBytes) changes.maxUploadBytes = bytes;
    const allowed = types.value
      .split(/[\s,]+/)
      .map((t) => t.trim())
      .filter(Boolean);
    if (allowed.join("\n") !== bucket.allowedContentTypes.join("\n")) {
      changes.allowedContentTypes = allowed;
    }
    if (versioning.value && versioning.value !== bucket.versioning) {
      changes.versioning = versioning.value;
    }
    if (lifecycle.value.trim() !== shownRules.trim()) {
      try {
        changes.lifecycle = lifecycle.value.trim() ? JSON.parse(lifecycle.value) : null;
      } catch {
        message.replaceChildren(h("p", { class: "error", role: "alert" }, "The lifecycle rules are not valid JSON."));
        return;
      }
    }
    encryption.collect(changes);
    const problem = sharing.collect(changes);
    if (problem) {
      message.replaceChildren(h("p", { class: "error", role: "alert" }, problem));
      return;
    }
    if (Object.keys(changes).length === 0) {
      message.replaceChildren(h("p", {}, "Nothing changed."));
      return;
    }
    try {
      await api.updateBucket(bucket.id, changes);
      Object.assign(bucket, await api.getBucket(bucket.id));
      message.replaceChildren(h("p", { class: "ok", role: "status" }, "Saved."));
    } catch (error) {
      message.replaceChildren(errorBox(error));
    }
  });
  return [
    h("h1", {}, `Settings of ${bucket.name}`),
    h(
      "p",
      {},
      badge(bucket.status),
      ` ${bucket.region}, created ${formatTime(bucket.createdAt)}, ${formatCount(bucket.fileCount)} files, ${formatBytes(bucket.sizeBytes)}`,
    ),
    form,
    snapshotsPanel(bucket, reload),
    webhooksPanel(bucket),
  ];
}

function objectLockText(lock) {
  const rule = lock.defaultRetention;
  if (!rule) {
    return "Object lock is on: versions can be kept under retention or a legal hold; no default retention.";
  }
  const length = rule.days ? `${rule.days} days` : `${rule.years} years`;
  return `Object lock is on: every new version is kept ${length} (${rule.mode}).`;
}
