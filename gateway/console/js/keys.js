// Keys: list, create (an API key, S3 credentials or a metrics key; scopes, optional bucket
// and expiry; the secret shown once), revoke.

import { allPages, api } from "./api.js";
import { actionsCell, announce, confirmDialog, errorBox, explain, field, formatTime, h } from "./ui.js";

const SCOPES = ["buckets:read", "buckets:write", "files:read", "files:write", "keys:manage"];
const KINDS = [
  ["api", "API key", "a Bearer key for the /v1 API"],
  ["s3", "S3 credentials", "an access key id and secret access key for the S3 endpoint"],
  ["metrics", "Metrics key", "reads GET /metrics; only a key that holds metrics:read can make one"],
];

export function keysView(main) {
  const tbody = h("tbody");
  const status = h("div", { "aria-live": "polite" });
  const secretBox = h("div", { "aria-live": "polite" });
  const formSlot = h("div");
  main.replaceChildren(
    h("h1", {}, "API keys"),
    status,
    secretBox,
    formSlot,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "list", "aria-label": "API keys" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["Name", "Kind", "Scopes", "Bucket", "Created", "Expires", "State"].map((t) =>
              h("th", { scope: "col" }, t),
            ),
            h("th", { scope: "col" }, h("span", { class: "visually-hidden" }, "Actions")),
          ),
        ),
        tbody,
      ),
    ),
  );

  let bucketNames = new Map();

  async function refresh() {
    try {
      const keys = await allPages((cursor) => api.listKeys(cursor));
      tbody.replaceChildren(...keys.map(row));
      status.replaceChildren();
    } catch (error) {
      status.replaceChildren(
        error.status === 403
          ? h("p", { class: "error", role: "alert" }, "This key has no keys:manage scope, so it cannot list or create keys.")
          : errorBox(error),
      );
      formSlot.replaceChildren();
    }
  }

  function row(key) {
    const state = key.revokedAt
      ? `revoked ${formatTime(key.revokedAt)}`
      : key.expiresAt && new Date(key.expiresAt) < new Date()
        ? "expired"
        : "active";
    return h(
      "tr",
      { "data-key-name": key.name },
      h("td", {}, key.name, key.accessKeyId ? null : h("small", { class: "muted" }, ` …${key.last4}`)),
      h("td", {}, key.accessKeyId ? `S3 ${key.accessKeyId}` : key.scopes.includes("metrics:read") ? "metrics" : "API"),
      h("td", {}, key.scopes.join(", ")),
      h("td", {}, key.bucketId ? bucketNames.get(key.bucketId) || key.bucketId : "all"),
      h("td", {}, formatTime(key.createdAt)),
      h("td", {}, key.expiresAt ? formatTime(key.expiresAt) : "never"),
      h("td", {}, state),
      actionsCell(
        key.revokedAt
          ? null
          : h(
              "button",
              {
                type: "button",
                class: "danger",
                "aria-label": `Revoke key ${key.name}`,
                onclick: () => revoke(key),
              },
              "Revoke",
            ),
      ),
    );
  }

  async function revoke(key) {
    const answer = await confirmDialog({
      title: `Revoke key ${key.name}?`,
      body: key.accessKeyId
        ? `Requests signed with the access key id ${key.accessKeyId} will be refused from now on.`
        : `Requests made with the key ending in ${key.last4} will be refused from now on.`,
      ok: "Revoke",
      danger: true,
    });
    if (answer !== "ok") return;
    try {
      await api.revokeKey(key.id);
      announce(`Key ${key.name} revoked.`);
    } catch (error) {
      announce(explain(error), "error");
    }
    await refresh();
  }

  function showSecret(key) {
    const secret = h("input", {
      readonly: true,
      value: key.secret,
      id: "new-secret",
      class: "secret",
      spellcheck: "false",
    });
    const accessKeyId = key.accessKeyId
      ? h("input", { readonly: true, value: key.accessKeyId, id: "new-access-key-id", class: "secret" })
      : null;
    const copied = h("span", { role: "status" });
    secretBox.replaceChildren(
      h(
        "section",
        { class: "card secret-card", "aria-labelledby": "secret-title" },
        h("h2", { id: "secret-title" }, `Secret of ${key.name}`),
        h("p", {}, "Copy it now: it is shown this once and cannot be shown again."),
        accessKeyId ? field("Access key id", accessKeyId) : null,
        field(accessKeyId ? "Secret access key" : "Secret", secret),
        h(
          "div",
          { class: "actions" },
          h(
            "button",
            {
              type: "button",
              class: "primary",
              onclick: async () => {
                secret.select();
                try {
                  await navigator.clipboard.writeText(key.secret);
                  copied.textContent = "Copied.";
                } catch {
                  copied.textContent = "Select the text and copy it.";
                }
              },
            },
            "Copy secret",
          ),
          h("button", { type: "button", onclick: () => secretBox.replaceChildren() }, "Done"),
          copied,
        ),
      ),
    );
    secret.focus();
    secret.select();
  }

  function createForm(buckets) {
    const name = h("input", { name: "name", required: true, autocomplete: "off" });
    const kinds = KINDS.map(([value]) =>
      h("input", { type: "radio", name: "kind", value, id: `kind-${value}`, checked: value === "api" }),
    );
    const boxes = SCOPES.map((scope) =>
      h("input", { type: "checkbox", name: "scopes", value: scope, id: `scope-${scope}` }),
    );
    const bucket = h(
      "select",
      { name: "bucketId" },
      h("option", { value: "" }, "All buckets"),
      buckets.map((b) => h("option", { value: b.id }, b.name)),
    );
    const expires = h("input", { type: "datetime-local", name: "expiresAt" });
    const message = h("div", { "aria-live": "polite" });
    const form = h(
      "form",
      { class: "stacked-form card", "aria-label": "Create a key" },
      h("h2", {}, "Create a key"),
      field("Key name", name),
      h(
        "fieldset",
        {},
        h("legend", {}, "Kind"),
        kinds.map((radio, i) =>
          h(
            "div",
            { class: "check" },
            radio,
            h("label", { for: radio.id }, KINDS[i][1]),
            h("small", { class: "muted" }, ` ${KINDS[i][2]}`),
          ),
        ),
      ),
      h(
        "fieldset",
        { id: "scope-choice" },
        h("legend", {}, "Scopes"),
        boxes.map((box) =>
          h("div", { class: "check" }, box, h("label", { for: box.id }, box.value)),
        ),
      ),
      field("Restrict to bucket", bucket),
      field("Expires (optional)", expires, "your local time"),
      h("button", { type: "submit", class: "primary" }, "Create key"),
      message,
    );
    const kind = () => kinds.find((radio) => radio.checked).value;
    for (const radio of kinds) {
      radio.addEventListener("change", () => {
        form.querySelector("#scope-choice").hidden = kind() === "metrics";
      });
    }
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      message.replaceChildren();
      const scopes =
        kind() === "metrics" ? ["metrics:read"] : boxes.filter((b) => b.checked).map((b) => b.value);
      if (scopes.length === 0) {
        message.replaceChildren(h("p", { class: "error", role: "alert" }, "Choose at least one scope."));
        return;
      }
      const fields = { name: name.value.trim(), scopes };
      if (kind() === "s3") fields.s3 = true;
      if (bucket.value) fields.bucketId = bucket.value;
      if (expires.value) fields.expiresAt = new Date(expires.value).toISOString().replace(/\.\d+Z$/, "Z");
      try {
        const key = await api.createKey(fields);
        form.reset();
        form.querySelector("#scope-choice").hidden = false;
        showSecret(key);
        await refresh();
      } catch (error) {
        message.replaceChildren(errorBox(error));
      }
    });
    return form;
  }

  allPages((cursor) => api.listBuckets(cursor))
    .catch(() => [])
    .then((buckets) => {
      bucketNames = new Map(buckets.map((b) => [b.id, b.name]));
      formSlot.replaceChildren(createForm(buckets));
      return refresh();
    });
  return () => {};
}
