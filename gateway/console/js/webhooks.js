// A bucket's webhooks in its settings: add one (its secret shown once), switch it on or off,
// delete it, and see its recent deliveries with the receiver's status codes; failed ones can
// be sent again.

import { api } from "./api.js";
import { announce, errorBox, explain, field, formatTime, h } from "./ui.js";

export function webhooksPanel(bucket) {
  const list = h("div", { "aria-live": "polite" });
  const url = h("input", { name: "webhookUrl", type: "url", required: true, placeholder: "https://hooks.example.com/bucketd" });
  const events = h("input", { name: "webhookEvents", value: "s3:*", spellcheck: "false" });
  const prefix = h("input", { name: "webhookPrefix", spellcheck: "false" });
  const message = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    { class: "stacked-form", "aria-label": "New webhook" },
    field("Webhook URL", url),
    field("Events", events, "comma-separated: s3:*, s3:ObjectCreated:*, s3:ObjectRemoved:*"),
    field("Key prefix", prefix, "only keys starting with this (empty: every key)"),
    h("button", { type: "submit", class: "primary" }, "Add webhook"),
    message,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const made = await api.createWebhook(bucket.id, {
        url: url.value.trim(),
        events: events.value.split(",").map((e) => e.trim()).filter(Boolean),
        prefix: prefix.value,
      });
      message.replaceChildren(
        h("p", { class: "ok", role: "status" }, "Webhook added. Its signing secret, shown once:"),
        h("input", { readonly: true, value: made.secret, "aria-label": "Signing secret" }),
      );
      await refresh();
    } catch (error) {
      message.replaceChildren(errorBox(error));
    }
  });

  async function refresh() {
    try {
      const hooks = (await api.listWebhooks(bucket.id)).data;
      list.replaceChildren(
        hooks.length === 0 ? h("p", {}, "No webhooks.") : null,
        ...(await Promise.all(hooks.map(hookCard))),
      );
    } catch (error) {
      list.replaceChildren(errorBox(error));
    }
  }

  async function hookCard(hook) {
    const deliveries = (await api.listDeliveries(bucket.id, hook.id)).data;
    const toggle = h(
      "button",
      {
        type: "button",
        onclick: async () => {
          await api.updateWebhook(bucket.id, hook.id, { enabled: !hook.enabled });
          await refresh();
        },
      },
      hook.enabled ? "Disable" : "Enable",
    );
    const redeliver = h(
      "button",
      {
        type: "button",
        onclick: async () => {
          try {
            const done = await api.redeliver(bucket.id, hook.id);
            announce(`${done.count} deliveries sent again`);
            await refresh();
          } catch (error) {
            announce(explain(error), "error");
          }
        },
      },
      "Redeliver failed",
    );
    const remove = h(
      "button",
      {
        type: "button",
        class: "danger",
        onclick: async () => {
          await api.deleteWebhook(bucket.id, hook.id);
          await refresh();
        },
      },
      "Delete webhook",
    );
    const rows = deliveries.map((d) =>
      h(
        "tr",
        { "data-status": d.status },
        h("td", {}, d.eventName || ""),
        h("td", {}, d.key),
        h("td", {}, d.status),
        h("td", {}, d.lastStatus === null ? d.lastError || "" : String(d.lastStatus)),
        h("td", {}, String(d.attempts)),
        h("td", {}, formatTime(d.doneAt || d.firstAttemptAt)),
      ),
    );
    return h(
      "section",
      { class: "card", "aria-label": `Webhook ${hook.url}` },
      h("h3", {}, hook.url),
      h("p", {}, `${hook.events.join(", ")}${hook.prefix ? ` under ${hook.prefix}` : ""} — ${hook.enabled ? "enabled" : "disabled"}`),
      h("div", { class: "actions" }, toggle, redeliver, remove),
      h(
        "table",
        { "aria-label": `Recent deliveries to ${hook.url}` },
        h(
          "thead",
          {},
          h("tr", {}, ...["Event", "Key", "Status", "Answer", "Attempts", "When"].map((c) => h("th", {}, c))),
        ),
        h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: 6 }, "No deliveries yet."))),
      ),
    );
  }

  refresh();
  return h("section", { "aria-label": "Webhooks" }, h("h2", {}, "Webhooks"), form, list);
}
