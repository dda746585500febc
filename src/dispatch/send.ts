// The send job. Every queued step has a job of its own, due at the step's time (src/dispatch/
// queue.ts); a job that runs dispatches a batch: its own step and a few other due steps of the
// organization (four per pooled SMTP connection), in three phases, so a step is never sent twice:
//   1. claim (one transaction, the batch's queue rows locked: claim.ts): the gates, in order,
//      set-based (gates.ts); a gate that defers moves the step's job to when it can pass, one that
//      forbids skips the step with its reason. The steps that pass are claimed: each gets its
//      mailbox (mailbox.ts), its Message-ID (compose.ts), and its send record written as `sending`
//      (the caps' ledger, ledger.ts, counted under the mailboxes' and the recipient domains' locks,
//      so no number of workers overshoots), the attempt counted in usage, and the jobs of the other
//      claimed steps removed;
//   2. the SMTP transactions, outside any transaction, concurrently over the transports' pools;
//      once the server answered DATA, and before the first byte of a message goes, its record's
//      hand-over mark commits (markHandedOver: only while the record is still this claim's);
//   3. the outcomes (one transaction, outcomes.ts): sent, bounced (5xx: suppression, events, the
//      sequence paused), tried again later (4xx, connection trouble; a throttle also backs off the
//      server that said it: backoff.ts), or possibly sent (no answer after the whole message went
//      over).
// A worker that dies between 1 and 3 leaves records `sending`: the recovery sweep (sweep.ts) takes
// back those not handed over (tried again, as if never claimed) and marks the others possibly
// sent, never sent again automatically. A job that finds its own step locked by another batch
// looks again a little later, so a step whose batch dies still has a job.
// Batching is what makes it fast: a step costs a share of some twenty statements, not thirty.
import pLimit from 'p-limit';
import { type Tx, withOrg } from '../../db/database.js';
import type { SendOutcome } from '../mail/transport.js';
import type { Deps } from '../platform/services.js';
import { recordServerAnswers, throttledSteps } from './backoff.js';
import { Batch, type Claim } from './batch.js';
import { BUSY_RECHECK_MS, lockBatch, markHandedOver, stillClaimed, writeClaims } from './claim.js';
import { runGates } from './gates.js';
import { DEPLOYMENT_MAILBOX } from './mailbox.js';
import { dropSettledJobs, recordOutcomes, writeDecisions } from './outcomes.js';
import { scheduleSends } from './queue.js';

/**
 * Batches in flight in this process: one batch's messages on the wire while the next is claimed or
 * recorded. More would only claim steps early, counting them against the caps while they wait for a
 * connection.
 */
const inFlight = pLimit(2);

/**
 * Steps a batch takes per pooled SMTP connection. The claim holds the mailbox's lock, so claims of
 * one mailbox go one at a time and each claim's statements are what a batch costs: with one step
 * per connection that chain set the rate (8.9 round trips per step in the sending bench), with four
 * it is 3.8. A step waiting in the pool is not possibly sent if the worker dies (its hand-over mark
 * is written only when its DATA starts), so a bigger batch costs no safety.
 */
const STEPS_PER_CONNECTION = 4;

/**
 * The send job of a queue row: dispatches a batch with that row in it (or without, when it is
 * held elsewhere or gone). `runnerId`: the worker runner whose claims these are (liveness.ts).
 */
export function sendStep(deps: Deps, org: string, queueId: string | null, runnerId: string | null = null): Promise<void> {
  return inFlight(() => dispatchBatch(deps, org, queueId, runnerId));
}

async function dispatchBatch(deps: Deps, org: string, queueId: string | null, runnerId: string | null): Promise<void> {
  const claims = await withOrg(deps.db, org, (trx) => claimBatch(deps, trx, org, queueId, runnerId));
  if (claims.length === 0) return;
  const done = await Promise.all(
    claims.map(async (c) => {
      const transport = deps.services.mail.forMailbox(c.mailbox.id === DEPLOYMENT_MAILBOX ? null : c.mailbox.smtpUrlSealed);
      const beforeData = () => markHandedOver(deps.db, org, c.recordId);
      const outcome: SendOutcome = transport
        ? await transport.send(c.message, { beforeData })
        : {
            kind: 'temporary',
            response: "the mailbox's SMTP credentials cannot be read (the secret key changed): set the mailbox up again",
            code: null,
            providerMessageId: null,
            aboutRecipient: false,
          };
      return { c, outcome };
    }),
  );
  if (deps.services.faults.has('send:after-smtp')) throw new Error('injected fault: send:after-smtp');
  await withOrg(deps.db, org, async (trx) => {
    // Only the claims the recovery sweep did not take back meanwhile have an outcome to record.
    const live = await stillClaimed(trx, org, done);
    await recordOutcomes(trx, org, live, deps.services.clock, throttledSteps(live));
    // The backoffs last: their rows are locked by the gates of batches that hold queue rows, so a
    // transaction takes them only once it needs no other lock.
    await writeDecisions(trx, org, await recordServerAnswers(deps, trx, org, live));
  });
}

/** Phase 1: the gates, then the claims. */
async function claimBatch(deps: Deps, trx: Tx, org: string, ownId: string | null, runnerId: string | null): Promise<Claim[]> {
  const { rows: locked, ownBusy } = await lockBatch(trx, org, ownId, STEPS_PER_CONNECTION * deps.config.smtpMaxConnections);
  // Another batch holds the job's own step: if that batch dies, this job is the step's only way out.
  if (ownBusy && ownId) await scheduleSends(trx, org, [{ queueId: ownId, runAt: new Date(Date.now() + BUSY_RECHECK_MS) }]);
  if (locked.length === 0) return [];
  const batch = new Batch(locked);
  const passed = await runGates(deps, trx, org, batch);
  const claims = passed ? await writeClaims(deps, trx, org, batch.pending, passed.chosen, passed.settings, runnerId) : [];
  await writeDecisions(trx, org, batch.decided);
  await dropSettledJobs(trx, claims, batch.decided, ownId);
  return claims;
}
