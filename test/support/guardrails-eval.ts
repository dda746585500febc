// The guardrails' labelled evaluation sets (test/fixtures/guardrails/*.json): every item is judged
// by checkDraft as the body of a draft written for its context, and the kinds of flag it carries
// are compared with the labelled ones. Shared by test/guardrails-eval.test.ts and the bench area
// scripts/bench/guardrails.ts, so both print the same figures.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkDraft } from '../../src/drafting/guardrails.js';

const FIXTURES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/guardrails');

export interface EvalSource {
  title: string;
  snippet: string;
  dated: boolean;
}

export interface EvalContext {
  language: string;
  contact: string;
  company: string;
  sender: string;
  products: string[];
  templateSubject: string;
  template: string;
  listContext: { connectionPoint: string | null; goal: string | null };
  sources: EvalSource[];
}

export interface EvalItem {
  id: string;
  category: string;
  context: string;
  /** The numbers of the sources the sentence cites. */
  cites: number[];
  text: string;
  /** The kinds of flag the item must carry; empty when it must carry none. */
  expect: string[];
  why: string;
}

export interface EvalSet {
  about: string;
  rules: string[];
  contexts: Record<string, EvalContext>;
  items: EvalItem[];
}

export const HELD_OUT_SETS = ['held-out', 'held-out-2', 'held-out-3', 'held-out-4'] as const;

export const loadEvalSet = (name: 'eval-set' | (typeof HELD_OUT_SETS)[number]): EvalSet =>
  JSON.parse(fs.readFileSync(path.join(FIXTURES, `${name}.json`), 'utf8')) as EvalSet;

/** The words a draft may use without a source, as generation builds them (src/drafting/generate.ts). */
const knownWords = (...names: string[]) =>
  new Set(names.flatMap((n) => n.toLowerCase().split(/[^\p{L}\p{N}'’-]+/u)).filter((w) => w.length > 1));

/** The kinds of flag checkDraft puts on one item (a flag without a kind is an unsupported claim). */
export function judge(set: EvalSet, item: EvalItem): string[] {
  const ctx = set.contexts[item.context];
  if (!ctx) throw new Error(`${item.id}: unknown context ${item.context}`);
  // Built as a plain object so the set can carry what the guardrails may not read yet (listContext).
  const input = {
    step: 1,
    subject: ctx.templateSubject,
    body: item.text,
    templateSubject: ctx.templateSubject,
    templateBody: ctx.template,
    citations: item.cites.map((sourceIndex) => ({ text: item.text.replace(/\s+/g, ' ').trim(), sourceIndex })),
    evidence: (i: number) => {
      const s = ctx.sources[i - 1];
      return s ? [{ snippet: s.snippet, title: s.title, dated: s.dated }] : [];
    },
    known: knownWords(ctx.contact, ctx.company, ctx.sender, ...ctx.products),
    listContext: [ctx.listContext.connectionPoint, ctx.listContext.goal],
    senderNames: [ctx.sender, ...ctx.products],
  };
  const flags = checkDraft(input).flags as Array<{ kind?: string }>;
  return [...new Set(flags.map((f) => f.kind ?? 'unsupported-claim'))].sort();
}

export interface Miss {
  id: string;
  category: string;
  text: string;
  expect: string[];
  got: string[];
}

export interface EvalScore {
  items: number;
  /** Per kind of flag on an item: right, wrong, missed. */
  truePositives: number;
  falsePositives: number;
  falseNegatives: number;
  precision: number;
  recall: number;
  /** Flagged or not, whatever the kind. */
  itemPrecision: number;
  itemRecall: number;
  misses: Miss[];
}

const ratio = (a: number, b: number) => (b === 0 ? 1 : a / b);

/** Precision and recall of the flags over a set, by kind of flag per item (and by item, whatever the kind). */
export function scoreSet(set: EvalSet): EvalScore {
  let tp = 0;
  let fp = 0;
  let fn = 0;
  let itemTp = 0;
  let itemFp = 0;
  let itemFn = 0;
  const misses: Miss[] = [];
  for (const item of set.items) {
    const got = judge(set, item);
    const expect = [...item.expect].sort();
    tp += got.filter((k) => expect.includes(k)).length;
    fp += got.filter((k) => !expect.includes(k)).length;
    fn += expect.filter((k) => !got.includes(k)).length;
    if (got.length > 0 && expect.length > 0) itemTp += 1;
    else if (got.length > 0) itemFp += 1;
    else if (expect.length > 0) itemFn += 1;
    if (got.join() !== expect.join()) misses.push({ id: item.id, category: item.category, text: item.text, expect, got });
  }
  return {
    items: set.items.length,
    truePositives: tp,
    falsePositives: fp,
    falseNegatives: fn,
    precision: ratio(tp, tp + fp),
    recall: ratio(tp, tp + fn),
    itemPrecision: ratio(itemTp, itemTp + itemFp),
    itemRecall: ratio(itemTp, itemTp + itemFn),
    misses,
  };
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

/** One line of figures, then each misjudged item. */
export function describeScore(name: string, s: EvalScore): string {
  const head = `${name}: ${s.items} items; flags by kind: precision ${pct(s.precision)}, recall ${pct(s.recall)} (${s.truePositives} right, ${s.falsePositives} wrong, ${s.falseNegatives} missed); by item: precision ${pct(s.itemPrecision)}, recall ${pct(s.itemRecall)}`;
  const lines = s.misses.map(
    (m) => `  ${m.id} [${m.category}] expected [${m.expect.join(', ')}] got [${m.got.join(', ')}]: ${m.text.replace(/\n/g, ' / ')}`,
  );
  return [head, ...lines].join('\n');
}

export const percent = pct;
