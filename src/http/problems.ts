// The one error type and the problem catalogue. Every error the service answers is a
// ProblemError turned into RFC 7807 application/problem+json by one function (src/http/app.ts);
// GET /problems/<slug> serves the catalogue entry as a page.

export interface ProblemType {
  status: number;
  title: string;
  /** What the problem means, for the documentation page. */
  meaning: string;
  /** Whether repeating the same request can succeed, and when. */
  retry: string;
}

export const PROBLEMS = {
  'validation-failed': {
    status: 400,
    title: 'Validation failed',
    meaning:
      'A parameter or body field is missing, of the wrong type, out of range, holds U+0000 (NUL, refused in every string of every request), or is refused by a rule of the operation, or the body nests arrays and objects deeper than 64 levels. `errors` lists the failing fields.',
    retry: 'No: correct the request first.',
  },
  'malformed-json': {
    status: 400,
    title: 'Malformed JSON',
    meaning: 'The request body is not JSON: it does not parse, or it was sent as another media type (a form, say).',
    retry: 'No: send a valid JSON body.',
  },
  'invalid-cursor': {
    status: 400,
    title: 'Invalid cursor',
    meaning:
      "The cursor was not issued by this deployment or was altered (cursors are signed with a key derived from the deployment's secret key, so a cursor from another deployment, or from before the key changed, is refused too).",
    retry: 'No: pass the `nextCursor` of a previous page unchanged, or start again without a cursor.',
  },
  'unknown-stage': {
    status: 400,
    title: 'Unknown stage',
    meaning: 'The stage slug or id names no stage of the organization.',
    retry: 'No: use a stage from GET /deal-stages.',
  },
  'stage-transition-not-allowed': {
    status: 400,
    title: 'Stage transition not allowed',
    meaning:
      'The deal cannot move to that stage from its current one (for example out of a closed stage without a reason, or to the stage it is already in).',
    retry: 'No: choose another stage or give the required reason.',
  },
  'reason-required': {
    status: 400,
    title: 'Reason required',
    meaning: 'This stage move needs a `reason` (closing a deal as lost, or reopening a closed deal).',
    retry: 'Yes, with a reason.',
  },
  'product-collision': {
    status: 400,
    title: 'Product collision',
    meaning: 'The contact already has an active sequence of a different product.',
    retry: 'No, not until the other sequence ends.',
  },
  'list-template-unavailable': {
    status: 400,
    title: 'List template unavailable',
    meaning: 'The list names a template (useCaseTemplateId) that no longer exists or is no longer active, so its drafts cannot be written.',
    retry: 'No: use a list whose template is available (a list without one uses the built-in sequence).',
  },
  'freemail-domain': {
    status: 400,
    title: 'Freemail domain',
    meaning: 'The domain belongs to a free email provider and cannot identify a company.',
    retry: "No: use the company's own domain.",
  },
  'unknown-event-type': {
    status: 400,
    title: 'Unknown event type',
    meaning: 'An event type is not in the catalogue of GET /webhooks/events.',
    retry: 'No: subscribe only to catalogued types.',
  },
  'unsafe-webhook-url': {
    status: 400,
    title: 'Unsafe webhook URL',
    meaning:
      'The webhook URL is not http(s), or resolves to a loopback, private, link-local, CGNAT, unique-local or cloud metadata address, which this deployment refuses. The operator of a self-hosted deployment allows such targets (an internal receiver, a test server) with the setting WEBHOOK_ALLOW_PRIVATE_TARGETS=true.',
    retry: 'No: use a publicly reachable URL, or ask the operator to set WEBHOOK_ALLOW_PRIVATE_TARGETS=true.',
  },
  'invalid-rule-trigger': {
    status: 400,
    title: 'Invalid rule trigger',
    meaning:
      "A custom rule's triggerEventType is not a catalogued type, is never emitted, or is a rule.* type (rules never trigger rules). `errors` locates it.",
    retry: 'No: trigger on an emitted type that is not rule.*.',
  },
  'invalid-rule-conditions': {
    status: 400,
    title: 'Invalid rule conditions',
    meaning:
      "A custom rule's conditions break the condition language (an unknown operator, a bad field path, a value of the wrong type, too deep or too large). `errors` locates the bad part.",
    retry: 'No: correct the conditions first.',
  },
  'invalid-rule-actions': {
    status: 400,
    title: 'Invalid rule actions',
    meaning: "A custom rule's actions repeat one another. `errors` locates the repeated action.",
    retry: 'No: correct the actions first.',
  },
  unauthorized: {
    status: 401,
    title: 'Unauthorized',
    meaning: 'The Authorization header is missing or malformed, or the API key is unknown, expired or revoked.',
    retry: 'No: send `Authorization: Bearer obk_live_<32 hex>` with a valid key.',
  },
  'insufficient-scope': {
    status: 403,
    title: 'Insufficient scope',
    meaning: 'The API key lacks the scope the operation requires; the detail names it.',
    retry: 'No: use a key minted with that scope.',
  },
  'role-required': {
    status: 403,
    title: 'Role required',
    meaning:
      "The operation needs a key attributed to a person with a particular role (for example MANAGER, ADMIN or OWNER to erase a contact), or acting on an item that is not the caller's own.",
    retry: 'No: use a key attributed to a person with the role.',
  },
  'not-entitled': {
    status: 403,
    title: 'Not entitled',
    meaning: "The organization's plan does not include this feature (outbound sending is not part of the free plan).",
    retry: 'No, not until the plan changes.',
  },
  'not-found': {
    status: 404,
    title: 'Not found',
    meaning: 'The resource does not exist, or belongs to another organization (the two are indistinguishable), or the route is unknown.',
    retry: 'No.',
  },
  'method-not-allowed': {
    status: 405,
    title: 'Method not allowed',
    meaning: 'The path exists but does not accept this HTTP method; the Allow header lists those it accepts.',
    retry: 'No: use one of the allowed methods.',
  },
  'list-has-in-flight-sequences': {
    status: 409,
    title: 'List has in-flight sequences',
    meaning: 'Contacts whose own list this is have ACTIVE, QUEUED, DRAFTED or APPROVED sequences.',
    retry: 'Yes, with `force=true` (the sequences are paused first), or once they have ended.',
  },
  'rule-limit-reached': {
    status: 409,
    title: 'Rule limit reached',
    meaning: 'The organization already holds the most custom rules it may (100).',
    retry: 'Yes, after deleting a rule.',
  },
  'idempotency-key-in-use': {
    status: 409,
    title: 'Idempotency key in use',
    meaning: 'Another request with the same Idempotency-Key is still being processed.',
    retry: "Yes, after a moment: the first request's response is then replayed.",
  },
  'draft-not-editable': {
    status: 409,
    title: 'Draft not editable',
    meaning:
      'The draft cannot get a new version (an edit or a regeneration): it was sent or is being sent, or its sequence is paused or has ended.',
    retry: 'No: edit the live draft of a step that is still to be sent (a paused sequence is resumed first).',
  },
  'lead-is-spam': { status: 409, title: 'Lead is spam', meaning: 'The lead was marked as spam and cannot be converted.', retry: 'No.' },
  'owner-not-removable': {
    status: 409,
    title: 'Owner not removable',
    meaning:
      "The person is the organization's owner (its longest-standing OWNER), who holds everything unattributed and cannot be removed from the team.",
    retry: 'No.',
  },
  'user-removed': {
    status: 409,
    title: 'User removed',
    meaning: 'The person was removed from the team and cannot be activated again.',
    retry: 'No: add the person again (a new sales person with the same email).',
  },
  'contact-erased': {
    status: 409,
    title: 'Contact erased',
    meaning: 'The contact was erased (GDPR): its data is gone for good, so it cannot be restored.',
    retry: 'No.',
  },
  'undo-window-expired': {
    status: 409,
    title: 'Undo window expired',
    meaning: 'The contact was soft-deleted more than 30 days ago (past its undoAvailableUntil), so it can no longer be restored.',
    retry: 'No: file the person again with POST /contacts.',
  },
  'contact-restore-conflict': {
    status: 409,
    title: 'Contact restore conflict',
    meaning:
      'The same person (normalized address) has a live contact again, filed after this one was deleted; restoring would make two. `conflictingContactId` names it.',
    retry: 'Yes, after deleting the conflicting contact.',
  },
  'step-not-possibly-sent': {
    status: 409,
    title: 'Step not possibly sent',
    meaning: 'Only a step in the send queue as possibly_sent is resolved; this one is in another state (sent, queued, resolved already).',
    retry: 'No.',
  },
  'lead-already-converted': {
    status: 409,
    title: 'Lead already converted',
    meaning: 'The lead was converted and cannot be marked as spam.',
    retry: 'No.',
  },
  'payload-too-large': {
    status: 413,
    title: 'Payload too large',
    meaning:
      "The request body exceeds the endpoint's limit: 1 MiB for the public and operator APIs (64 MiB for an operator CSV import), 32 KiB for a lead form submission. Bodies are counted as they arrive, with or without Content-Length, and refused as soon as they pass the limit.",
    retry: 'No: send a smaller body.',
  },
  'malformed-csv': {
    status: 400,
    title: 'Malformed CSV',
    meaning:
      'The CSV file is empty, has no header or no email column, is not UTF-8, has unbalanced quotes, a row whose cell count differs from the header, or too many rows; the detail says where. Nothing was imported.',
    retry: 'No: correct the file first.',
  },
  'unsupported-media-type': {
    status: 415,
    title: 'Unsupported media type',
    meaning: 'The body is of a media type the endpoint does not read (a lead form submission is JSON, form-encoded or multipart).',
    retry: 'No: send the body as a supported media type.',
  },
  'idempotency-key-reused': {
    status: 422,
    title: 'Idempotency key reused',
    meaning: 'The Idempotency-Key was already used with a different request body or on another resource (path).',
    retry: 'No: use a new key for a different request.',
  },
  'stage-gate-blocked': {
    status: 422,
    title: 'Stage gate blocked',
    meaning:
      'A stage gate is not met; `gate`, `gateMode` and `needsOverride` say which and whether an `overrideReason` lets the move pass.',
    retry: 'Yes, once the gate is met or with an `overrideReason` when `needsOverride` is true.',
  },
  'deal-without-primary-contact': {
    status: 422,
    title: 'Deal has no primary contact',
    meaning: "Activities are logged against the deal's primary contact, and this deal has none.",
    retry: 'Yes, after setting primaryContactId with PATCH /deals/{id}.',
  },
  'rate-limited': {
    status: 429,
    title: 'Rate limit exceeded',
    meaning: 'The API key spent its requests of the current 60-second window.',
    retry: 'Yes, after Retry-After seconds.',
  },
  'capture-rate-limited': {
    status: 429,
    title: 'Too many submissions',
    meaning:
      'The source address sent more lead form submissions to the organization than the per-address limit of the current 10-minute window allows.',
    retry: 'Yes, after Retry-After seconds.',
  },
  'authentication-throttled': {
    status: 429,
    title: 'Too many failed authentications',
    meaning:
      'The source address failed to authenticate with the operator token (the operator API, GET /metrics) more often than the limit of the current 10-minute window allows; the right token is still accepted.',
    retry: 'Yes, after Retry-After seconds, or at once with the right token.',
  },
  'research-budget-exhausted': {
    status: 429,
    title: 'Research budget exhausted',
    meaning: "The organization's research budget for the period is spent.",
    retry: 'Yes, once the budget resets or is raised by an operator.',
  },
  'drafts-allowance-exhausted': {
    status: 429,
    title: 'Drafts allowance exhausted',
    meaning: "The organization's drafts allowance for the period (its plan's drafts per month) is used up; GET /usage shows it.",
    retry: 'Yes, once the period resets or an operator raises the allowance.',
  },
  'internal-error': {
    status: 500,
    title: 'Internal error',
    meaning: 'An unexpected failure; nothing was changed. Quote the request id (in `instance` and X-Request-Id) when reporting it.',
    retry: 'Perhaps: the failure may be transient.',
  },
  'not-implemented': {
    status: 501,
    title: 'Not implemented',
    meaning: 'The operation is part of the API description but this deployment does not implement it yet.',
    retry: 'No, not until a release implements it.',
  },
  'erasure-not-configured': {
    status: 503,
    title: 'Erasure not configured',
    meaning: 'The deployment has no erasure hash secret of at least 32 characters (ERASURE_HASH_SECRET), so nothing can be erased.',
    retry: 'Yes, once the operator configures the secret.',
  },
  'service-unavailable': {
    status: 503,
    title: 'Service unavailable',
    meaning: 'The database is unreachable or not yet migrated.',
    retry: 'Yes, shortly.',
  },
} as const satisfies Record<string, ProblemType>;

export type ProblemSlug = keyof typeof PROBLEMS;

export class ProblemError extends Error {
  readonly slug: ProblemSlug;
  readonly status: number;
  readonly extra: Record<string, unknown>;
  readonly headers: Record<string, string>;

  constructor(slug: ProblemSlug, detail?: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
    super(detail ?? PROBLEMS[slug].meaning);
    this.slug = slug;
    this.status = PROBLEMS[slug].status;
    this.extra = extra;
    this.headers = headers;
  }
}

export const notFound = (what = 'resource') => new ProblemError('not-found', `No ${what} with that id.`);
export const invalid = (detail: string, field?: string) =>
  new ProblemError('validation-failed', detail, field ? { errors: [{ field, message: detail }] } : {});

export function problemBody(baseUrl: string, err: ProblemError, instance: string) {
  return {
    type: `${baseUrl}/problems/${err.slug}`,
    title: PROBLEMS[err.slug].title,
    status: err.status,
    detail: err.message,
    instance,
    ...err.extra,
  };
}

export function problemPage(slug: string): string | null {
  if (!Object.hasOwn(PROBLEMS, slug)) return null;
  const p = PROBLEMS[slug as ProblemSlug];
  const e = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${e(p.title)}</title></head>
<body><h1>${e(p.title)}</h1><p><code>${e(slug)}</code> &middot; HTTP ${p.status}</p>
<h2>What it means</h2><p>${e(p.meaning)}</p><h2>Can a retry succeed?</h2><p>${e(p.retry)}</p></body></html>\n`;
}
