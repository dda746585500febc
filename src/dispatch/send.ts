// The send job. Every queued step has a job of its own, due at the step's time (src/dispatch/
// queue.ts); a job that runs dispatches a batch: its own step and up to BATCH - 1 other due steps
// of the organization, in three phases, so a step is never sent twice:
//   1. claim (one transaction, the batch's queue rows locked: claim.ts): the gates, in order,
//      set-based (gates.ts); a gate that defers moves the step's job to when it can pass, one that
//      forbids skips the step with its reason. The steps that pass are claimed: each gets its
//      mailbox (mailbox.ts), its Message-ID (compose.ts), and its send record written as `sending`
//      (the caps' ledger, ledger.ts, counted under the mailboxes' and the recipient domains' locks,
//      so no number of workers overshoots), the attempt counted in usage, and the jobs of the other
//      claimed steps removed;
//   2. the SMTP transactions, outside any transaction, concurrently over the transports' pools;
//   3. the outcomes (one transaction, outcomes.ts): sent, bounced (5xx: suppression, events, the
//      sequence paused), tried again later (4xx, connection trouble; a throttle also backs off the
//      server that said it: backoff.ts), or possibly sent (no answer after the whole message went
//      over).
// A worker that dies between 1 and 3 leaves records `sending`: the recovery sweep marks them
// possibly sent, and they are never sent again automatically.
// Batching is what makes it fast: a step costs a share of some twenty statements, not thirty.
import pLimit from 'p-limit';
import { type Tx, withOrg } from '../../db/database.js';
import type { SendOutcome } from '../mail/transport.js';
import type { Deps } from '../platform/services.js';
import { recordServerAnswers, throttledSteps } from './backoff.js';
import { Batch, type Claim } from './batch.js';
import { lockBatch, writeClaims } from './claim.js';
import { runGates } from './gates.js';
import { DEPLOYMENT_MAILBOX } from './mailbox.js';
import { dropSettledJobs, recordOutcomes, writeDecisions } from './outcomes.js';

/**
 * Batches in flight in this process: enough to keep every pooled SMTP connection busy; more would
 * only claim steps early (and leave more possibly sent if the process dies) and add to the memory
 * and the bookkeeping of messages waiting for a connection.
 */
const inFlight = pLimit(4);

/** The send job of a queue row: dispatches a batch with that row in it (or without, when it is held elsewhere or gone). */
export function sendStep(deps: Deps, org: string, queueId: string | null): Promise<void> {
  return inFlight(() => dispatchBatch(deps, org, queueId));
}

async function dispatchBatch(deps: Deps, org: string, queueId: string | null): Promise<void> {
  const claims = await withOrg(deps.db, org, (trx) => claimBatch(deps, trx, org, queueId));
  if (claims.length === 0) return;
  const done = await Promise.all(
    claims.map(async (c) => {
      const transport = deps.services.mail.forMailbox(c.mailbox.id === DEPLOYMENT_MAILBOX ? null : c.mailbox.smtpUrlSealed);
      const outcome: SendOutcome = transport
        ? await transport.send(c.message)
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
    await recordOutcomes(trx, org, done, deps.services.clock, throttledSteps(done));
    // The backoffs last: their rows are locked by the gates of batches that hold queue rows, so a
    // transaction takes them only once it needs no other lock.
    await writeDecisions(trx, org, await recordServerAnswers(deps, trx, org, done));
  });
}

/** Phase 1: the gates, then the claims. */
async function claimBatch(deps: Deps, trx: Tx, org: string, ownId: string | null): Promise<Claim[]> {
  const locked = await lockBatch(trx, org, ownId);
  if (locked.length === 0) return [];
  const batch = new Batch(locked);
  const passed = await runGates(deps, trx, org, batch);
  const claims = passed ? await writeClaims(deps, trx, org, batch.pending, passed.chosen, passed.settings) : [];
  await writeDecisions(trx, org, batch.decided);
  await dropSettledJobs(trx, claims, batch.decided, ownId);
  return claims;
}
