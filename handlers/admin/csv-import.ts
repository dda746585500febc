// The operator's CSV import of contacts into a list (src/crm/contact-import.ts does the work).

import { withOrg } from '../../db/database.js';
import { requireOrgExists } from '../../src/account/organizations.js';
import { importListCsv } from '../../src/crm/contact-import.js';
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';
import { ProblemError } from '../../src/http/problems.js';

/** Media types read as CSV (a CSV file is often sent as plain text). */
const CSV_TYPES = /^(text\/csv|application\/csv|text\/plain)\b/i;

const adminImportListCsv: AdminHandler<'adminImportListCsv'> = async ({ db, config, params, bodyStream, contentType }) => {
  if (!CSV_TYPES.test(contentType ?? '')) {
    throw new ProblemError('unsupported-media-type', `The import reads a CSV body (text/csv), not "${contentType ?? 'none'}".`);
  }
  await requireOrgExists(db, params.orgId);
  const body =
    bodyStream ??
    (async function* empty() {
      /* no body */
    })();
  // Bound to the organization (like a keyed request), so the search views used to match companies by name apply.
  const result = await withOrg(db, params.orgId, (trx) =>
    importListCsv(trx, params.orgId, params.listId, body, config.erasureHashSecret),
  ).catch((e: unknown) => {
    // A refusal may come before the body was read to its end: the connection cannot carry another request.
    if (e instanceof ProblemError) throw new ProblemError(e.slug, e.message, e.extra, { ...e.headers, Connection: 'close' });
    throw e;
  });
  return { status: 200 as const, body: result };
};

export const csvImportHandlers = { adminImportListCsv } satisfies Partial<AdminHandlers>;
