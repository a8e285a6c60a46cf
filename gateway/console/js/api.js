// The console's only way to the server: the public /v1 API with the key the person pasted in.
// The key lives in sessionStorage (gone with the tab), never in a URL.

const STORAGE_KEY = "bucketd.key";
const BASE = "/v1";

export class ApiError extends Error {
  constructor(status, code, message, headers) {
    super(message);
    this.status = status;
    this.code = code;
    this.headers = headers;
  }
}

export const session = {
  get key() {
    return sessionStorage.getItem(STORAGE_KEY);
  },
  signIn(key) {
    sessionStorage.setItem(STORAGE_KEY, key);
  },
  signOut() {
    sessionStorage.removeItem(STORAGE_KEY);
  },
};

// The rate-limit headers of the last response, for the organization page.
export const lastLimits = { limit: null, remaining: null, reset: null, listeners: [] };

function noteLimits(headers) {
  const limit = headers.get("x-ratelimit-limit");
  if (limit === null) return;
  lastLimits.limit = Number(limit);
  lastLimits.remaining = Number(headers.get("x-ratelimit-remaining"));
  lastLimits.reset = Number(headers.get("x-ratelimit-reset"));
  for (const listener of lastLimits.listeners) listener(lastLimits);
}

// A key as one path parameter: slashes and dots encoded, so the server sees it verbatim.
export function keyPath(key) {
  return encodeURIComponent(key).replace(/\./g, "%2E");
}

export function filePath(bucketId, key) {
  return `/buckets/${encodeURIComponent(bucketId)}/files/${keyPath(key)}`;
}

function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") search.set(name, value);
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

function headersObject(headers) {
  const out = {};
  headers.forEach((value, name) => (out[name] = value));
  return out;
}

async function errorOf(response) {
  let code = "http_error";
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && body.error) ({ code, message } = body.error);
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(response.status, code, message, headersObject(response.headers));
}

export async function request(method, path, { body, headers = {}, key = session.key } = {}) {
  const init = { method, headers: { ...headers, Authorization: `Bearer ${key}` } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const response = await fetch(BASE + path, init);
  noteLimits(response.headers);
  if (!response.ok) throw await errorOf(response);
  return response;
}

export async function json(method, path, options) {
  return (await request(method, path, options)).json();
}

export const api = {
  organization: (key) => json("GET", "/organization", { key }).then((b) => b.data),

  listBuckets: (cursor) => json("GET", `/buckets${query({ limit: 100, cursor })}`),
  getBucket: (id) => json("GET", `/buckets/${encodeURIComponent(id)}`).then((b) => b.data),
  createBucket: (fields) => json("POST", "/buckets", { body: fields }).then((b) => b.data),
  updateBucket: (id, fields) =>
    json("PATCH", `/buckets/${encodeURIComponent(id)}`, { body: fields }),
  deleteBucket: (id, force) =>
    json("DELETE", `/buckets/${encodeURIComponent(id)}${force ? "?force=true" : ""}`),

  listFiles: (bucketId, prefix, cursor) =>
    json(
      "GET",
      `/buckets/${encodeURIComponent(bucketId)}/files${query({
        prefix: cursor ? undefined : prefix,
        delimiter: cursor ? undefined : "/",
        limit: 100,
        cursor,
      })}`,
    ),
  fileMetadata: (bucketId, key) =>
    json("GET", `${filePath(bucketId, key)}?metadata=true`).then((b) => b.data),
  updateFile: (bucketId, key, fields) => json("PATCH", filePath(bucketId, key), { body: fields }),
  signFile: (bucketId, key, expiresIn) =>
    json("POST", `/buckets/${encodeURIComponent(bucketId)}/sign/${keyPath(key)}`, {
      body: { expiresIn },
    }).then((b) => b.data),
  deleteFile: (bucketId, key, versionId) =>
    json("DELETE", `${filePath(bucketId, key)}${query({ versionId })}`),
  download: async (bucketId, key, versionId) =>
    (await request("GET", `${filePath(bucketId, key)}${query({ versionId })}`)).blob(),
  listVersions: (bucketId, key, cursor) =>
    json(
      "GET",
      `/buckets/${encodeURIComponent(bucketId)}/versions${query({ key, limit: 100, cursor })}`,
    ),
  restoreVersion: (bucketId, key, versionId) =>
    json(
      "POST",
      `/buckets/${encodeURIComponent(bucketId)}/versions/${encodeURIComponent(versionId)}/restore`,
      { body: { key } },
    ).then((b) => b.data),
  head: async (bucketId, key, bytes) =>
    (await request("GET", filePath(bucketId, key), { headers: { Range: `bytes=0-${bytes - 1}` } }))
      .arrayBuffer(),

  listWebhooks: (bucketId) => json("GET", `/buckets/${encodeURIComponent(bucketId)}/webhooks`),
  createWebhook: (bucketId, fields) =>
    json("POST", `/buckets/${encodeURIComponent(bucketId)}/webhooks`, { body: fields }).then(
      (b) => b.data,
    ),
  updateWebhook: (bucketId, id, fields) =>
    json("PATCH", `/buckets/${encodeURIComponent(bucketId)}/webhooks/${encodeURIComponent(id)}`, {
      body: fields,
    }),
  deleteWebhook: (bucketId, id) =>
    json("DELETE", `/buckets/${encodeURIComponent(bucketId)}/webhooks/${encodeURIComponent(id)}`),
  listDeliveries: (bucketId, id) =>
    json(
      "GET",
      `/buckets/${encodeURIComponent(bucketId)}/webhooks/${encodeURIComponent(id)}/deliveries?limit=20`,
    ),
  redeliver: (bucketId, id) =>
    json(
      "POST",
      `/buckets/${encodeURIComponent(bucketId)}/webhooks/${encodeURIComponent(id)}/redeliver`,
      { body: {} },
    ).then((b) => b.data),

  createSnapshot: (bucketId, name) =>
    json("POST", `/buckets/${encodeURIComponent(bucketId)}/snapshots`, { body: { name } }).then(
      (b) => b.data,
    ),
  listBucketSnapshots: (bucketId, cursor) =>
    json("GET", `/buckets/${encodeURIComponent(bucketId)}/snapshots${query({ limit: 100, cursor })}`),
  restoreSnapshot: (id) =>
    json("POST", `/snapshots/${encodeURIComponent(id)}/restore`).then((b) => b.data),
  forkSnapshot: (id, name) =>
    json("POST", `/snapshots/${encodeURIComponent(id)}/fork`, { body: { name } }).then((b) => b.data),
  deleteSnapshot: (id) => request("DELETE", `/snapshots/${encodeURIComponent(id)}`),

  listKeys: (cursor) => json("GET", `/keys${query({ limit: 100, cursor })}`),
  createKey: (fields) => json("POST", "/keys", { body: fields }).then((b) => b.data),
  revokeKey: (id) => json("DELETE", `/keys/${encodeURIComponent(id)}`),
};

// Every page of a list, following nextCursor.
export async function allPages(fetchPage) {
  const items = [];
  let cursor = null;
  do {
    const page = await fetchPage(cursor);
    items.push(...page.data);
    cursor = page.meta.nextCursor;
  } while (cursor);
  return items;
}

// An upload with progress: fetch cannot report the bytes sent, XMLHttpRequest can.
export function upload(bucketId, key, file, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("PUT", BASE + filePath(bucketId, key));
    xhr.setRequestHeader("Authorization", `Bearer ${session.key}`);
    xhr.setRequestHeader("Content-Type", file.type || "application/octet-stream");
    xhr.upload.onprogress = (event) => onProgress(event.loaded, file.size);
    xhr.onload = () => {
      const headers = new Headers();
      for (const line of xhr.getAllResponseHeaders().trim().split(/[\r\n]+/)) {
        const at = line.indexOf(":");
        if (at > 0) headers.append(line.slice(0, at).trim(), line.slice(at + 1).trim());
      }
      noteLimits(headers);
      let body = null;
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        // not JSON
      }
      if (xhr.status >= 200 && xhr.status < 300) {
        resolve(body.data);
      } else {
        const error = body && body.error ? body.error : { code: "http_error", message: xhr.statusText };
        reject(new ApiError(xhr.status, error.code, error.message, headersObject(headers)));
      }
    };
    xhr.onerror = () => reject(new ApiError(0, "network_error", "the connection failed", {}));
    xhr.send(file);
  });
}
