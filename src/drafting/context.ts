// What a draft is written from, and what a writer hands back.
import type { Fact, Source } from '../research/dossier.js';
import type { Citation, Flag } from './guardrails.js';
import type { LinkPolicy } from './links.js';
import type { MergeValues } from './merge.js';

export interface TemplateStep {
  step: number;
  dayOffset: number;
  subject: string;
  body: string;
}

export interface DraftContext {
  step: TemplateStep;
  stepCount: number;
  merge: MergeValues;
  /** The contact's research the draft may cite (its sources are what sourceIndex points into). */
  research: { runId: string; facts: Fact[]; sources: Source[] } | null;
  /** Words the sender may use without a source: the contact's and their company's names, lower-case. */
  known: ReadonlySet<string>;
  /** The sender organization's and its products' names (the guardrails read a clause opening with one as about the sender). */
  senderNames?: ReadonlyArray<string>;
  /** The contact's function (from the title), to rank open roles in it first. */
  contactFunction: string | null;
  /** The links a model-written draft may carry besides the template's (links.ts); undefined: the template's only. */
  links?: LinkPolicy;
  /** A reviewer's wishes for a regeneration (POST /drafts/{id}/regenerate); the model writer reads them. */
  instructions?: string;
}

export interface StoredCitation extends Citation {
  /** The text on the source the sentence rests on (a fact's snippet, or the source's). */
  snippet: string;
}

export interface WrittenDraft {
  subject: string;
  body: string;
  citations: StoredCitation[];
  /** The effective model id, or `fallback`. */
  provider: string;
  attempts: number;
  repaired: string[];
  advisories: string[];
  flags: Flag[];
  tokens: number;
  costMillicents: number;
}

/** What a cited source index vouches for: the facts of that source and the source itself. */
/**
 * What the guardrails judge a sequence draft of this context against, whoever wrote it: the
 * evidence of its sources and the words that are the sender's own (known names, the list's
 * connection point and goal, the sender's names).
 */
export const judgedAgainst = (ctx: DraftContext) => ({
  evidence: evidenceOf(ctx.research),
  known: ctx.known,
  listContext: [ctx.merge.connectionPoint, ctx.merge.goal],
  senderNames: ctx.senderNames,
});

export function evidenceOf(research: DraftContext['research']) {
  return (sourceIndex: number) => {
    const source = research?.sources[sourceIndex - 1];
    if (!research || !source) return [];
    const dated =
      source.kind === 'feed-item' ||
      source.kind === 'article' ||
      research.facts.some((f) => f.sourceIndex === sourceIndex && typeof f.publishedAt === 'string');
    return [
      { snippet: source.snippet, title: source.title, dated },
      ...research.facts
        .filter((f) => f.sourceIndex === sourceIndex)
        .map((f) => ({ snippet: `${f.text} ${f.source.snippet}`, title: f.source.title, dated })),
    ];
  };
}

/**
 * A draft's stored evidence: the research run it cited and each citation with its source as it
 * was then (GET /drafts/{id}?include=evidence shows them while that run is the contact's research;
 * a citation of a `message` source, the message a reply answers, always).
 */
export function storedEvidence(
  research: DraftContext['research'],
  citations: StoredCitation[],
  extra: Record<string, unknown> = {},
): string {
  return JSON.stringify({
    researchRunId: research?.runId || null,
    citations: citations.map((c) => {
      const s = research?.sources[c.sourceIndex - 1];
      return {
        text: c.text,
        sourceIndex: c.sourceIndex,
        sourceUrl: s?.url ?? null,
        sourceTitle: s?.title ?? null,
        sourceDomain: s?.domain || null,
        sourceSnippet: c.snippet,
        sourceKind: s?.kind ?? null,
      };
    }),
    ...extra,
  });
}
