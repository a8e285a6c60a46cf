// The organization: plan, usage against the plan's limits, and the last rate-limit headers.

import { api, lastLimits } from "./api.js";
import { errorBox, formatBytes, formatCount, formatTime, h } from "./ui.js";

function usageBar(label, used, limit, format = formatCount) {
  const percent = limit > 0 ? Math.min(100, (used / limit) * 100) : 0;
  return h(
    "div",
    { class: "usage" },
    h("div", { class: "usage-label" }, h("span", {}, label), h("span", {}, `${format(used)} of ${format(limit)}`)),
    h("meter", {
      min: 0,
      max: limit,
      value: used,
      high: limit * 0.8,
      optimum: 0,
      "aria-label": `${label}: ${format(used)} of ${format(limit)} (${percent.toFixed(0)}%)`,
    }),
  );
}

function limitsBlock() {
  const block = h("section", { "aria-labelledby": "limits-title", class: "card" });
  function render() {
    const { limit, remaining, reset } = lastLimits;
    block.replaceChildren(
      h("h2", { id: "limits-title" }, "Rate limit (last response)"),
      limit === null
        ? h("p", {}, "No response yet.")
        : h(
            "dl",
            { class: "limits" },
            h("dt", {}, "X-RateLimit-Limit"),
            h("dd", {}, `${formatCount(limit)} requests per minute`),
            h("dt", {}, "X-RateLimit-Remaining"),
            h("dd", {}, formatCount(remaining)),
            h("dt", {}, "X-RateLimit-Reset"),
            h("dd", {}, `${new Date(reset * 1000).toLocaleTimeString()} (${reset})`),
          ),
    );
  }
  render();
  lastLimits.listeners.push(render);
  return { block, stop: () => lastLimits.listeners.splice(lastLimits.listeners.indexOf(render), 1) };
}

export function organizationView(main) {
  const limits = limitsBlock();
  const body = h("div", {}, h("p", {}, "Loading…"));
  main.replaceChildren(h("h1", {}, "Organization"), body, limits.block);
  api.organization().then(
    (org) =>
      body.replaceChildren(
        h(
          "section",
          { class: "card", "aria-labelledby": "plan-title" },
          h("h2", { id: "plan-title" }, `${org.name}, ${org.plan} plan`),
          h("p", { class: "muted" }, `${org.id}, created ${formatTime(org.createdAt)}`),
          usageBar("Buckets", org.usage.buckets, org.limits.maxBuckets),
          // What only snapshots still hold counts against the quota too (api.md, Snapshots).
          usageBar(
            "Storage",
            org.usage.storedBytes + (org.usage.snapshotBytes || 0),
            org.limits.maxStorageBytes,
            formatBytes,
          ),
          org.usage.snapshotBytes
            ? h(
                "p",
                { class: "muted" },
                `${formatBytes(org.usage.snapshotBytes)} of it held only by snapshots: deleting them frees it.`,
              )
            : null,
          h(
            "p",
            {},
            `${formatCount(org.usage.files)} files. ${formatCount(org.limits.requestsPerMinute)} requests per minute.`,
          ),
        ),
      ),
    (error) => body.replaceChildren(errorBox(error)),
  );
  return limits.stop;
}
