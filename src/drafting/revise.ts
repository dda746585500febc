// A reviewer's new version of a step: an edit (PATCH /drafts/{id}, EDITED) or a regeneration
// (POST /drafts/{id}/regenerate, REGENERATED). Both are checked in a first short transaction, then
// written by draft generation's one pass over the step (src/drafting/generate.ts, mode `step`), so
// the new version is judged, stored, superseding, queue-withdrawing and announced exactly as a
// generated one is; an edit takes no allowance. Both run outside the request's transaction
// (`x-long-running`): a regeneration may wait on the model.
import { withOrg } from '../../db/database.js';
import { draftsRemaining } from '../account/usage.js';
import { sendClaimed } from '../dispatch/queue.js';
import { invalid, ProblemError } from '../http/problems.js';
import { newId } from '../platform/ids.js';
import type { Deps } from '../platform/services.js';
import { getDraft } from './draft-reads.js';
import type { EditedText } from './edit-writer.js';
import { generateDrafts, REWRITABLE_STATUSES, type Rewrite } from './generate.js';
import { assertEmailable, draftForUpdate } from './review.js';

const notEditable = (why: string) => new ProblemError('draft-not-editable', why);
const allowanceUsed = () =>
  new ProblemError(
    'drafts-allowance-exhausted',
    "The period's drafts allowance is used up; a regeneration counts against it (GET /usage).",
  );

interface StoredEvidence {
  researchRunId?: string | null;
  citations?: Array<{ text: string; sourceIndex: number; sourceSnippet: string | null }>;
}

/** The live, unsent step draft a new version may replace (400, 404, 409 otherwise), with what an edit keeps. */
async function revisable(deps: Deps, org: string, id: string, charged: boolean) {
  return withOrg(deps.db, org, async (trx) => {
    const d = await draftForUpdate(trx, org, id);
    if (d.superseded_at !== null)
      throw invalid('This draft is a superseded version of its step; change the live version (GET /drafts?sequenceId=...).');
    if (d.sequence_id === null) throw invalid('The draft is not part of a sequence; only the draft of a sequence step gets new versions.');
    if (d.sent_at !== null) throw notEditable('The draft was sent; a sent email cannot change.');
    if (await sendClaimed(trx, org, d.id))
      throw notEditable('The draft is being sent (or was handed to the mail server); it cannot change.');
    const seq = await trx
      .selectFrom('contact_sequences')
      .select('status')
      .where('organization_id', '=', org)
      .where('id', '=', d.sequence_id)
      .executeTakeFirstOrThrow();
    if (!REWRITABLE_STATUSES.includes(seq.status))
      throw notEditable(
        `The draft's sequence is ${seq.status}; resume it (a resume writes its unsent steps again) before changing a step.`,
      );
    await assertEmailable(trx, org, d.contact_id, deps.config.erasureHashSecret);
    if (charged && (await draftsRemaining(trx, org, deps.services.clock)) < 1) throw allowanceUsed();
    return { ...d, sequence_id: d.sequence_id };
  });
}

type Revisable = Awaited<ReturnType<typeof revisable>>;

/** Writes the new version through draft generation and answers it (409 when the step changed meanwhile). */
async function rewrite(deps: Deps, org: string, d: Revisable, how: Omit<Rewrite, 'step' | 'replaces'>) {
  await generateDrafts(deps, org, {
    sequenceIds: [d.sequence_id],
    pass: newId('gen'),
    mode: 'step',
    runId: null,
    rewrite: { ...how, step: d.step, replaces: d.id },
  });
  return withOrg(deps.db, org, async (trx) => {
    const live = await trx
      .selectFrom('drafts')
      .select(['id', 'version'])
      .where('organization_id', '=', org)
      .where('sequence_id', '=', d.sequence_id)
      .where('step', '=', d.step)
      .where('superseded_at', 'is', null)
      .executeTakeFirst();
    if (live && live.id !== d.id && live.version > d.version) return getDraft(trx, org, live.id, { evidence: false });
    if (how.charged && (await draftsRemaining(trx, org, deps.services.clock)) < 1) throw allowanceUsed();
    throw notEditable(
      'The step changed while its new version was being written (it was sent, queued for sending, or changed by another request).',
    );
  });
}

/** PATCH /drafts/{id}: the reviewer's subject and body as an EDITED version (the live draft unchanged when nothing changes). */
export async function editDraft(deps: Deps, org: string, id: string, change: { subject?: string; body?: string }) {
  const d = await revisable(deps, org, id, false);
  const subject = change.subject ?? d.subject;
  const body = change.body ?? d.body;
  if (subject === d.subject && body === d.body) return withOrg(deps.db, org, (trx) => getDraft(trx, org, d.id, { evidence: false }));
  const ev = (d.evidence ?? {}) as StoredEvidence;
  const edit: EditedText = {
    subject,
    body,
    citations: (Array.isArray(ev.citations) ? ev.citations : []).map((c) => ({
      text: c.text,
      sourceIndex: c.sourceIndex,
      snippet: c.sourceSnippet ?? '',
    })),
    researchRunId: typeof ev.researchRunId === 'string' ? ev.researchRunId : null,
    provider: d.provider,
  };
  return rewrite(deps, org, d, { status: 'EDITED', charged: false, edit });
}

/** POST /drafts/{id}/regenerate: the step written again as a REGENERATED version, counted against the allowance. */
export async function regenerateDraft(deps: Deps, org: string, id: string, instructions: string | undefined) {
  const d = await revisable(deps, org, id, true);
  return rewrite(deps, org, d, { status: 'REGENERATED', charged: true, instructions });
}
