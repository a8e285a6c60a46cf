// Encryption at rest in the console: a bucket's default encryption in its settings (none,
// AES256, or aws:kms with the keyring's default key or a named one), and a file's own in its
// details. The server decides what is allowed (aws:kms needs a keyring): its refusal is shown.

import { field, h } from "./ui.js";

const KMS = "aws:kms";

// The settings form's fieldset, and `collect(changes)`, which adds `encryption` when it
// changed (null removes it).
export function encryptionFields(bucket) {
  const current = bucket.encryption || "";
  const kind = current.startsWith(KMS) ? KMS : current;
  const mode = h(
    "select",
    { name: "encryption" },
    h("option", { value: "", selected: kind === "" }, "None"),
    h("option", { value: "AES256", selected: kind === "AES256" }, "AES256 (SSE-S3)"),
    h("option", { value: KMS, selected: kind === KMS }, "aws:kms (SSE-KMS)"),
  );
  const keyName = h("input", {
    name: "kmsKey",
    value: current.slice(KMS.length + 1),
    placeholder: "the keyring's default key",
    spellcheck: "false",
    autocomplete: "off",
  });
  const keyField = field("KMS key", keyName, "a key of the server's keyring (storage.kms_keys); empty for its default");
  const showKey = () => (keyField.hidden = mode.value !== KMS);
  mode.addEventListener("change", showKey);
  showKey();
  const elements = [
    h(
      "fieldset",
      {},
      h("legend", {}, "Encryption at rest"),
      field(
        "Default encryption",
        mode,
        "given to every later upload, copy and restore that asks for none; files already stored keep theirs",
      ),
      keyField,
    ),
  ];

  function collect(changes) {
    const name = keyName.value.trim();
    const chosen = mode.value === KMS && name ? `${KMS}/${name}` : mode.value || null;
    if (chosen !== (bucket.encryption || null)) changes.encryption = chosen;
  }

  return { elements, collect };
}

// The details panel's rows for a file's encryption.
export function encryptionRows(file) {
  return [h("dt", {}, "Encryption"), h("dd", { class: "encryption" }, described(file))];
}

function described(file) {
  switch (file.encryption) {
    case null:
    case undefined:
      return "None";
    case "AES256":
      return "AES256 (SSE-S3: under the server's master key)";
    case KMS:
      return `aws:kms (SSE-KMS), key ${file.kmsKeyId}`;
    case "SSE-C":
      return "SSE-C: under its uploader's own key; only the S3 endpoint, given that key, reads it";
    default:
      return file.encryption;
  }
}
