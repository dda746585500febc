// The desk's only way to the service: the public API on this origin, with the key kept in this
// tab's session storage (never in localStorage or a cookie, gone when the tab closes). A 429 is
// waited out once, for the Retry-After the service gave (at most a minute), and retried; a batch
// decision carries an Idempotency-Key, so that retry cannot decide twice.

const KEY = 'outbound.desk.apiKey';
const MAX_WAIT_MS = 60_000;

export const session = {
  get: () => sessionStorage.getItem(KEY),
  set: (key) => sessionStorage.setItem(KEY, key),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `The service answered ${status}.`);
    this.status = status;
    this.problem = problem;
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Milliseconds to wait for a Retry-After value (seconds or an HTTP date); null when absent or unreadable. */
export function retryAfterMs(value) {
  if (value == null || value === '') return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

/** Listeners told when the desk waits for the rate limit (to say so on the page). */
const waiting = new Set();
export const onRateLimitWait = (fn) => waiting.add(fn);

/** Calls /api/v1{path}; answers the parsed body, throws ApiError for a problem. */
export async function api(method, path, body, { idempotent = false } = {}) {
  const key = session.get();
  if (!key) throw new ApiError(401, { title: 'Not signed in.' });
  const headers = { authorization: `Bearer ${key}`, accept: 'application/json' };
  const init = { method, headers, cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer' };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  if (idempotent) headers['idempotency-key'] = crypto.randomUUID();
  for (let attempt = 0; ; attempt++) {
    const res = await fetch(`/api/v1${path}`, init);
    if (res.status === 429 && attempt === 0) {
      const ms = retryAfterMs(res.headers.get('retry-after'));
      // A wait beyond a minute (a spent monthly allowance, say) is reported, not waited out.
      if (ms !== null && ms <= MAX_WAIT_MS) {
        for (const fn of waiting) fn(ms);
        await sleep(ms);
        continue;
      }
    }
    const text = await res.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null;
    }
    if (!res.ok) throw new ApiError(res.status, data);
    return data;
  }
}

/** A query string from the non-empty values. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}
