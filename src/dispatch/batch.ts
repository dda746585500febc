// A batch of due steps on its way through the send job's phases (src/dispatch/send.ts): the
// shapes the phases pass on (a locked step with its data, a gate's decision, a mailbox, a claim)
// and how the gates' decisions are kept, each step decided at most once and in gate order.
import type { composeMessage } from '../mail/message.js';

/** Steps one job dispatches at most: enough to amortize its statements, few enough that a worker killed mid-batch leaves little possibly sent. */
export const BATCH = 50;
/** How long a step waits before looking again when its gate has no known end. */
export const RECHECK_MS = 15 * 60_000;

export interface Mailbox {
  id: string;
  email: string;
  name: string | null;
  dailyCap: number;
  smtpUrlSealed: string | null;
  dkim: { domainName: string; keySelector: string; keySealed: string } | null;
  status: string;
}

/** A locked queue row; the fields after `attempts` are filled in from its contact, sequence and draft (src/dispatch/claim.ts takeStepData). */
export interface Row {
  id: string;
  sequence_id: string;
  step: number;
  contact_id: string;
  draft_id: string;
  scheduled_at: Date;
  attempts: number;
  email: string;
  name: string | null;
  draftId: string;
  subject: string;
  body: string;
  stepCount: number;
  seqMailbox: string | null;
  seqStatus: string;
}

export type Decision = { skip: string; detail: string } | { defer: string; until: Date; detail: string };

/** A gate's verdict on one step: a decision, or null to let it pass on. */
export type Gate = (r: Row) => Decision | null;

export interface Claim {
  recordId: string;
  queueId: string;
  sequenceId: string;
  step: number;
  stepCount: number;
  contactId: string;
  draftId: string;
  mailbox: Mailbox;
  message: ReturnType<typeof composeMessage>;
}

/** The batch's steps as the gates sort them: those still passing, and those a gate decided on. */
export class Batch {
  readonly now = new Date();
  readonly decided = new Map<string, Decision>();
  /** The steps every gate so far let through, in the order they were locked. */
  pending: Row[];

  constructor(locked: object[]) {
    this.pending = locked.map((r) => r as Row);
  }

  /** Applies a gate to the steps still passing; a step it decides on leaves the batch's passing steps. */
  decide(keep: Gate): void {
    this.pending = this.pending.filter((r) => {
      const d = keep(r);
      if (d) this.decided.set(r.id, d);
      return !d;
    });
  }

  deferAll(code: string, until: Date, detail: string): void {
    this.decide(() => ({ defer: code, until, detail }));
  }
}
