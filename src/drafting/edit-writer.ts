// A reviewer's edit (PATCH /drafts/{id}) as a written draft: their subject and body, judged by the
// guardrails as a generated draft is. The sentences they kept keep their citations, so a cited
// line stays supported; a new or changed sentence has none, so a new claim about the prospect that
// no source states is flagged. Citations of an older research run than the contact's current one
// are not kept: their source numbers no longer point at the sources they named.
import { collapse } from '../platform/text.js';
import { type DraftContext, judgedAgainst, type StoredCitation, type WrittenDraft } from './context.js';
import { checkDraft } from './guardrails.js';
import { fillMergeFields, SUBJECT_FALLBACKS } from './merge.js';

export interface EditedText {
  subject: string;
  body: string;
  /** The edited version's citations and the research run they cite. */
  citations: StoredCitation[];
  researchRunId: string | null;
  /** Who wrote the edited version (kept: the text the reviewer left is theirs). */
  provider: string | null;
}

const fold = (s: string) => collapse(s).toLowerCase();

export function writeEdit(ctx: DraftContext, edit: EditedText): WrittenDraft {
  const subjectT = fillMergeFields(ctx.step.subject, ctx.merge, SUBJECT_FALLBACKS);
  const bodyT = fillMergeFields(ctx.step.body, ctx.merge);
  const sameRun = edit.researchRunId !== null && edit.researchRunId === (ctx.research?.runId ?? null);
  const body = fold(edit.body);
  const citations = sameRun ? edit.citations.filter((c) => body.includes(fold(c.text))) : [];
  const checked = checkDraft({
    step: ctx.step.step,
    subject: edit.subject,
    body: edit.body,
    templateSubject: subjectT.text,
    templateBody: bodyT.text,
    citations,
    ...judgedAgainst(ctx),
  });
  return {
    subject: checked.subject,
    body: checked.body,
    citations,
    provider: edit.provider ?? 'fallback',
    attempts: 0,
    repaired: checked.repaired,
    advisories: checked.advisories,
    flags: checked.flags,
    tokens: 0,
    costMillicents: 0,
  };
}
