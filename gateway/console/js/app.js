// The console's shell: sign-in, navigation and the hash router.

import { api, session } from "./api.js";
import { bucketSettingsView, bucketsView } from "./buckets.js";
import { filesView } from "./files.js";
import { keysView } from "./keys.js";
import { organizationView } from "./org.js";
import { announce, errorBox, field, h } from "./ui.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
let cleanup = () => {};

function route() {
  const hash = location.hash.slice(1) || "/buckets";
  const [path, search = ""] = hash.split("?");
  const params = new URLSearchParams(search);
  const parts = path.split("/").filter(Boolean);
  if (parts[0] === "buckets" && parts.length === 3 && parts[2] === "settings") {
    return () => bucketSettingsView(main, parts[1]);
  }
  if (parts[0] === "buckets" && parts.length === 2) {
    return () => filesView(main, parts[1], params.get("prefix") || "");
  }
  if (parts[0] === "organization") return () => organizationView(main);
  if (parts[0] === "keys") return () => keysView(main);
  return () => bucketsView(main);
}

function markCurrent() {
  const section = (location.hash.slice(2) || "buckets").split(/[/?]/)[0];
  for (const link of nav.querySelectorAll("a")) {
    if (link.dataset.section === section) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

function render() {
  cleanup();
  announce("");
  if (!session.key) {
    nav.hidden = true;
    cleanup = signInView();
    return;
  }
  nav.hidden = false;
  markCurrent();
  cleanup = route()() || (() => {});
  const heading = main.querySelector("h1");
  if (heading) {
    heading.setAttribute("tabindex", "-1");
    heading.focus({ preventScroll: true });
  }
}

function signInView() {
  const key = h("input", {
    type: "password",
    name: "key",
    required: true,
    autocomplete: "off",
    spellcheck: "false",
    placeholder: "svc_…",
  });
  const message = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    { class: "stacked-form card sign-in", "aria-label": "Sign in" },
    h("h1", {}, "Sign in to bucketd"),
    h(
      "p",
      {},
      "Paste an API key. It is kept in this tab only (sessionStorage) and sent in the Authorization header; the admin key of a fresh server is in data/admin.key.",
    ),
    field("API key", key),
    h("button", { type: "submit", class: "primary" }, "Sign in"),
    message,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    message.replaceChildren();
    const candidate = key.value.trim();
    try {
      await api.organization(candidate);
    } catch (error) {
      message.replaceChildren(errorBox(error));
      key.select();
      return;
    }
    session.signIn(candidate);
    if (!location.hash || location.hash === "#/") location.hash = "#/buckets";
    render();
  });
  main.replaceChildren(form);
  key.focus();
  return () => {};
}

document.getElementById("sign-out").addEventListener("click", () => {
  session.signOut();
  location.hash = "";
  render();
});
window.addEventListener("hashchange", render);
render();
