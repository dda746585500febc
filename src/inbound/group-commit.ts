// Group commit of the mail the SMTP listener receives. A message goes through three stages, the
// grouped ones taking whatever is queued when they are free (the messages that arrive together,
// on any connection, form a group): routing (the group's routing reads in one cross-organization
// transaction), authentication (the DNS checks, per message, outside any transaction; started
// beside the routing read when nothing in the message could let its route prove the sender), and
// the store (at most STORE_GROUPS groups at once): the group's messages stored, announced and classified with their effects in ONE
// transaction, each in a savepoint bound to its organization, so a message that fails rolls back
// to its savepoint and fails alone while the others commit. A message's promise settles only
// after the COMMIT (the listener answers 250 then, never for mail not durably stored); a failed
// COMMIT rejects every message of the group (451: the senders try again). Under light load a
// group is one message and nothing waits; under load the commits (and their WAL flushes) and the
// transactions' round trips are shared by the group.
import { sql } from 'kysely';
import { bindOrg, transactionOn, withSystem } from '../../db/database.js';
import { groupStage } from '../platform/group-stage.js';
import type { SystemDeps } from '../platform/services.js';
import {
  authenticateRouted,
  beforeCommit,
  checksOf,
  type Delivery,
  type Ingested,
  needsChecks,
  type Prepared,
  parseDelivery,
  routeParsed,
  storePrepared,
} from './ingest.js';
import type { Route } from './route.js';

/**
 * Store transactions in flight at once: while one commits, the next group is already written (on
 * two cores, one group waiting on its round trips left the database idle half the time).
 */
export const STORE_GROUPS = 2;

type Settled<O> = PromiseSettledResult<O>;

const fulfilled = <O>(value: O): Settled<O> => ({ status: 'fulfilled', value });
const rejected = <O>(reason: unknown): Settled<O> => ({ status: 'rejected', reason });

type Parsed = Awaited<ReturnType<typeof parseDelivery>>;

/** The routes of a group in one read-only cross-organization transaction; if it fails, each message routed alone. */
async function routeGroup(deps: SystemDeps, group: Parsed[]): Promise<Settled<Route | null>[]> {
  try {
    return await withSystem(deps.systemDb, async (trx) => {
      const out: Settled<Route | null>[] = [];
      for (const p of group) out.push(fulfilled(await routeParsed(deps, trx, p)));
      return out;
    });
  } catch {
    return Promise.allSettled(group.map((p) => withSystem(deps.systemDb, (trx) => routeParsed(deps, trx, p))));
  }
}

/** The group's messages in one transaction, a savepoint each; rejects them all when the commit fails. */
async function storeGroup(deps: SystemDeps, group: Prepared[]): Promise<Settled<Ingested>[]> {
  return deps.db.connection().execute((conn) =>
    transactionOn(conn, async () => {
      const out: Settled<Ingested>[] = [];
      for (const [i, p] of group.entries()) {
        // The previous message's savepoint is released (or was rolled back to) in the same round trip.
        await bindOrg(conn, p.route.organizationId, `${i > 0 ? 'RELEASE SAVEPOINT inbound_message; ' : ''}SAVEPOINT inbound_message`);
        try {
          out.push(fulfilled(await storePrepared(deps, conn, p)));
        } catch (e) {
          await sql.raw('ROLLBACK TO SAVEPOINT inbound_message').execute(conn);
          out.push(rejected(e));
        }
      }
      beforeCommit(deps);
      return out;
    }),
  );
}

export interface InboundIngestion {
  /** Stores a message received over SMTP; resolves once it is committed (or known to route nowhere). */
  ingest(d: Delivery): Promise<Ingested>;
}

export function groupIngestion(deps: SystemDeps): InboundIngestion {
  const routing = groupStage<Parsed, Route | null>((group) => routeGroup(deps, group));
  const storing = groupStage<Prepared, Ingested>((group) => storeGroup(deps, group), { concurrency: STORE_GROUPS });
  return {
    async ingest(d) {
      const parsed = await parseDelivery(d);
      // Checks no route can spare start beside the routing read (the same checks, sooner).
      const early = needsChecks(deps, parsed) ? checksOf(deps, d) : null;
      const prepared = await authenticateRouted(deps, parsed, await routing.submit(parsed), early);
      if (prepared === null) return { stored: false, reason: 'unroutable' };
      return storing.submit(prepared);
    },
  };
}
