// The one statement of the rule "a live contact is neither soft-deleted nor erased", for every
// query and check that means exactly that. (Places that test something else keep their own
// condition: "not yet erased" during erasure, an inbound lead's erasure, and contact filing's
// lookup, which reads deleted-but-not-erased rows differently; see src/crm/contact-filing.ts.)
import { type RawBuilder, type SqlBool, sql } from 'kysely';

/**
 * The rule as a condition on a contacts row: on the source aliased `alias`, or unqualified on
 * the only contacts source of the statement. One expression for both forms of query: a Kysely
 * `where(...)` or join `on(...)`, and a fragment inside raw `sql`.
 */
export function isLiveContact(alias?: string): RawBuilder<SqlBool> {
  const column = (name: string) => sql.ref(alias === undefined ? name : `${alias}.${name}`);
  return sql<SqlBool>`(${column('deleted_at')} IS NULL AND ${column('erased_at')} IS NULL)`;
}

/** The rule on a contact row already read. */
export const isLiveContactRow = (c: { deleted_at: Date | null; erased_at: Date | null }): boolean =>
  c.deleted_at === null && c.erased_at === null;
