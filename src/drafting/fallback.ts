// The `fallback` provider: no language model. The template step with its merge fields filled, plus
// one personalisation sentence built from a research fact and citing it: step 1 uses the best
// fact, step 2 the next, and so on, so each email of a sequence brings its own reason to write.
// Deterministic: the same inputs give the same draft.

import { functionOf } from '../research/assess.js';
import type { Fact } from '../research/dossier.js';
import { type DraftContext, evidenceOf, type StoredCitation, type WrittenDraft } from './context.js';
import { checkDraft } from './guardrails.js';
import { fillMergeFields, SUBJECT_FALLBACKS } from './merge.js';

const NEWS = new Set(['funding', 'launch', 'expansion', 'leadership', 'partnership']);
const GREETING_LINE = /^\s*(hi|hello|hey|dear|good (morning|afternoon|evening))\b[^.!?\n]{0,40}[,!]?\s*$/i;

/** Facts worth a sentence, best first: recent news, then open roles (the contact's function first), then stated challenges. */
export function rankFacts(facts: Fact[], contactFunction: string | null): Fact[] {
  const news = facts
    .filter((f) => NEWS.has(f.kind) && typeof f.publishedAt === 'string')
    .sort((a, b) => Date.parse(String(b.publishedAt)) - Date.parse(String(a.publishedAt)));
  const roles = facts.filter((f) => f.kind === 'hiring' && f.text.startsWith('Hiring: '));
  const inFunction = roles.filter((f) => contactFunction !== null && functionOf(f.source.snippet) === contactFunction);
  const challenges = facts.filter((f) => f.kind === 'challenge');
  return [...news, ...inFunction, ...roles.filter((f) => !inFunction.includes(f)), ...challenges];
}

/** The personalisation sentence for a fact; it repeats the fact's own words, so its claims are the source's. */
export function sentenceFor(fact: Fact): string {
  if (fact.kind === 'hiring') return `I noticed you are hiring a ${fact.source.snippet}.`;
  if (fact.kind === 'challenge') return `I read on your site: "${fact.text}"`;
  return `I saw the news "${fact.text.replace(/[.!?]+$/, '')}".`;
}

/** The body with a sentence added after the greeting line, or after the body's first sentence. */
export function insertAfterOpening(body: string, sentence: string): string {
  const lines = body.split('\n');
  const first = lines.findIndex((l) => l.trim() !== '');
  if (first < 0) return sentence;
  if (GREETING_LINE.test(lines[first])) {
    return [...lines.slice(0, first + 1), '', sentence, ...(lines[first + 1]?.trim() === '' ? [] : ['']), ...lines.slice(first + 1)].join(
      '\n',
    );
  }
  const line = lines[first];
  const end = /[.!?](\s|$)/.exec(line);
  const at = end ? end.index + 1 : line.length;
  lines[first] = `${line.slice(0, at)} ${sentence}${line.slice(at)}`;
  return lines.join('\n');
}

export function writeFallback(ctx: DraftContext): WrittenDraft {
  const subject = fillMergeFields(ctx.step.subject, ctx.merge, SUBJECT_FALLBACKS);
  const body = fillMergeFields(ctx.step.body, ctx.merge);
  const repaired = [...subject.repaired, ...body.repaired];
  const advisories = [...subject.unknown, ...body.unknown].map((f) => `unknown-merge-field: ${f} names no field and was removed`);
  let text = body.text;
  const citations: StoredCitation[] = [];
  const fact = ctx.research ? rankFacts(ctx.research.facts, ctx.contactFunction)[ctx.step.step - 1] : undefined;
  if (fact) {
    const sentence = sentenceFor(fact);
    text = insertAfterOpening(text, sentence);
    citations.push({ text: sentence, sourceIndex: fact.sourceIndex, snippet: fact.source.snippet });
  }
  const checked = checkDraft({
    step: ctx.step.step,
    subject: subject.text,
    body: text,
    templateSubject: subject.text,
    templateBody: body.text,
    citations,
    evidence: evidenceOf(ctx.research),
    known: ctx.known,
    listContext: [ctx.merge.connectionPoint, ctx.merge.goal],
    senderNames: ctx.senderNames,
  });
  return {
    subject: checked.subject,
    body: checked.body,
    citations,
    provider: 'fallback',
    attempts: 1,
    repaired: [...repaired, ...checked.repaired],
    advisories: [...advisories, ...checked.advisories],
    flags: checked.flags,
    tokens: 0,
    costMillicents: 0,
  };
}
