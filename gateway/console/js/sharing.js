// Sharing in the console: a bucket's public switch, CORS rules and policy (JSON, checked here
// before it is sent and by the server after), a file's tags, and share links (signed URLs).

import { api } from "./api.js";
import { errorBox, field, h } from "./ui.js";

const LIFETIMES = [
  ["3600", "1 hour"],
  ["86400", "1 day"],
  ["604800", "7 days"],
];

function jsonArea(name, value, rows) {
  return h(
    "textarea",
    { name, rows, spellcheck: "false", class: "code" },
    value ? JSON.stringify(value, null, 2) : "",
  );
}

// The sharing fields of the settings form, and `collect(changes)`, which adds what changed
// and answers an error message for JSON that does not parse (null when all is well).
export function sharingFields(bucket) {
  const isPublic = h("input", { name: "public", type: "checkbox", checked: bucket.public });
  const cacheControl = h("input", {
    name: "cacheControl",
    value: bucket.cacheControl || "",
    placeholder: "public, max-age=3600",
    spellcheck: "false",
  });
  const cors = jsonArea("cors", bucket.cors, 5);
  const policy = jsonArea("policy", bucket.policy, 8);
  const shownCors = cors.value.trim();
  const shownPolicy = policy.value.trim();
  const elements = [
    h(
      "fieldset",
      {},
      h("legend", {}, "Sharing"),
      h("label", { class: "check" }, isPublic, " Public: anyone may download its files without a key"),
      field("Cache-Control of public downloads", cacheControl),
      field(
        "CORS rules",
        cors,
        'JSON, e.g. [{"allowedOrigins": ["https://app.example.com"], "allowedMethods": ["GET", "PUT"], "allowedHeaders": ["*"]}]; empty for none',
      ),
      field(
        "Bucket policy",
        policy,
        'JSON in AWS\'s policy language (see docs/s3.md), e.g. {"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::' +
          bucket.name +
          '/public/*"}]}; empty for none',
      ),
    ),
  ];

  function parsed(area, label) {
    try {
      return { value: area.value.trim() ? JSON.parse(area.value) : null };
    } catch (error) {
      return { error: `The ${label} are not valid JSON: ${error.message}` };
    }
  }

  function collect(changes) {
    if (isPublic.checked !== bucket.public) changes.public = isPublic.checked;
    const control = cacheControl.value.trim() || null;
    if (control !== (bucket.cacheControl || null)) changes.cacheControl = control;
    if (cors.value.trim() !== shownCors) {
      const rules = parsed(cors, "CORS rules");
      if (rules.error) return rules.error;
      changes.cors = rules.value;
    }
    if (policy.value.trim() !== shownPolicy) {
      const document = parsed(policy, "policy's contents");
      if (document.error) return document.error;
      changes.policy = document.value;
    }
    return null;
  }

  return { elements, collect };
}

// Editing a file's tags (key=value, one per line) and making a share link.
export function fileSharing(bucketId, file, onChanged) {
  const tags = h(
    "textarea",
    { name: "tags", rows: 3, spellcheck: "false", "aria-label": "Tags, one key=value per line" },
    Object.entries(file.tags || {})
      .map(([key, value]) => `${key}=${value}`)
      .join("\n"),
  );
  const lifetime = h(
    "select",
    { name: "lifetime", "aria-label": "Link lifetime" },
    LIFETIMES.map(([seconds, label]) => h("option", { value: seconds }, label)),
  );
  const link = h("input", { name: "link", readonly: true, "aria-label": "Share link", hidden: true });
  const message = h("div", { "aria-live": "polite" });

  async function saveTags() {
    const pairs = {};
    for (const line of tags.value.split("\n").map((l) => l.trim()).filter(Boolean)) {
      const at = line.indexOf("=");
      if (at < 1) {
        message.replaceChildren(h("p", { class: "error", role: "alert" }, `"${line}" is not key=value.`));
        return;
      }
      pairs[line.slice(0, at).trim()] = line.slice(at + 1).trim();
    }
    try {
      await api.updateFile(bucketId, file.key, { tags: pairs });
      message.replaceChildren(h("p", { class: "ok", role: "status" }, "Tags saved."));
      onChanged();
    } catch (error) {
      message.replaceChildren(errorBox(error));
    }
  }

  async function share() {
    try {
      const signed = await api.signFile(bucketId, file.key, Number(lifetime.value));
      link.value = signed.url;
      link.hidden = false;
      link.select();
      try {
        await navigator.clipboard.writeText(signed.url);
        message.replaceChildren(h("p", { class: "ok", role: "status" }, "Link copied."));
      } catch {
        message.replaceChildren(h("p", { role: "status" }, "Copy the link above."));
      }
    } catch (error) {
      message.replaceChildren(errorBox(error));
    }
  }

  return h(
    "section",
    { class: "file-sharing", "aria-label": "Tags and sharing" },
    field("Tags", tags, "key=value, one per line (up to 10)"),
    h("button", { type: "button", onclick: saveTags }, "Save tags"),
    h(
      "div",
      { class: "actions" },
      lifetime,
      h("button", { type: "button", class: "primary", onclick: share }, "Copy share link"),
    ),
    link,
    message,
  );
}
