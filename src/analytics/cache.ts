// Analytics answers memoized for CACHE_SECONDS per organization and key, in Postgres so every API
// node agrees on hit or miss. The body is kept as the JSON text that was sent, so a hit is one
// indexed read written out as it is. Two nodes missing at once both compute and the later write
// wins; both answers are equally fresh.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';

export const CACHE_SECONDS = 300;

export interface Memoized {
  text: string;
  hit: boolean;
}

/** The cached body of `key` if it is younger than CACHE_SECONDS, else `compute()`'s, stored. */
export async function memoized(conn: Tx, organizationId: string, key: string, compute: () => Promise<unknown>): Promise<Memoized> {
  const cached = await sql<{ body: string }>`
    SELECT body FROM analytics_cache
    WHERE organization_id = ${organizationId} AND cache_key = ${key} AND computed_at > now() - make_interval(secs => ${CACHE_SECONDS})`.execute(
    conn,
  );
  if (cached.rows[0]) return { text: cached.rows[0].body, hit: true };
  const text = JSON.stringify(await compute());
  // The organization's expired entries go with the write, so the table holds only live answers.
  await sql`
    WITH gone AS (
      DELETE FROM analytics_cache
      WHERE organization_id = ${organizationId} AND cache_key <> ${key} AND computed_at <= now() - make_interval(secs => ${CACHE_SECONDS}))
    INSERT INTO analytics_cache (organization_id, cache_key, body, computed_at) VALUES (${organizationId}, ${key}, ${text}, now_ms())
    ON CONFLICT (organization_id, cache_key) DO UPDATE SET body = EXCLUDED.body, computed_at = EXCLUDED.computed_at`.execute(conn);
  return { text, hit: false };
}
