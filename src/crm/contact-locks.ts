// The filing locks: the order every write that turns on a person's address takes (POST /contacts
// and lead conversion filing, lead capture, erasure, the operator's restore), and the CSV import's
// organization-wide lock instead of one lock per address.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';

/** The organization-wide filing lock: shared by every address lock, exclusive for a CSV import. */
const filingLockKey = (organizationId: string) => `contact-filing:${organizationId}`;

/**
 * Serializes, to commit, the writes of one organization that turn on one (normalized) address.
 * It also takes the organization's filing lock shared, so these writes wait while a CSV import
 * (which holds it exclusively instead of one lock per address) files the organization's contacts.
 */
export async function lockAddress(trx: Tx, organizationId: string, email: string): Promise<void> {
  await sql`select pg_advisory_xact_lock_shared(hashtextextended(${filingLockKey(organizationId)}, 0)),
    pg_advisory_xact_lock(hashtextextended(${`contact:${organizationId}:${email}`}, 0))`.execute(trx);
}

/** Takes the organization's filing lock exclusively, to commit: no address lock of the organization is granted meanwhile. */
export async function lockAllAddresses(trx: Tx, organizationId: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${filingLockKey(organizationId)}, 0))`.execute(trx);
}
