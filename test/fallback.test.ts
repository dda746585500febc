// The fallback writer on its own (no model, no service): the built-in sequence written for every
// kind of fact research produces is whole, punctuated sentences with one cited personal line and
// the sender's signature; the merge fields the docs list are the ones the code fills.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DraftContext } from '../src/drafting/context.js';
import { sentenceFor, writeFallback } from '../src/drafting/fallback.js';
import { fillMergeFields, MERGE_FIELDS, type MergeValues } from '../src/drafting/merge.js';
import { senderValues } from '../src/drafting/sender.js';
import type { Fact, Source } from '../src/research/dossier.js';
import { BUILTIN_TEMPLATES } from '../src/sequences/builtin-templates.js';
import { citationProblems } from './support/citations.js';

const FETCHED = '2031-03-02T09:00:00.000Z';
const BUILTIN = BUILTIN_TEMPLATES['builtin-sequence'];

/** One fact of each kind src/research/dossier.ts produces (its wording as the dossier words it), and a kind it may add later. */
const FACTS: Array<{ kind: string; text: string; snippet: string; publishedAt?: string; title?: string }> = [
  {
    kind: 'funding',
    text: 'Nordlicht Logistics raises €18M to automate cold-chain hubs in a Series B',
    snippet: 'Nordlicht Logistics raises €18M to automate cold-chain hubs in a Series B',
    publishedAt: '2031-02-20T08:00:00Z',
  },
  {
    kind: 'launch',
    text: 'Introducing FrostTrack, live temperature tracking for every pallet',
    snippet: 'Introducing FrostTrack, live temperature tracking for every pallet',
    publishedAt: '2031-02-10T08:00:00Z',
  },
  {
    kind: 'leadership',
    text: 'Nordlicht names Ines Carvalho as Chief Operating Officer!',
    snippet: 'Nordlicht names Ines Carvalho as Chief Operating Officer!',
    publishedAt: '2031-02-01T08:00:00Z',
  },
  {
    kind: 'expansion',
    text: 'Nordlicht opens a new hub in Rotterdam',
    snippet: 'Nordlicht opens a new hub in Rotterdam',
    publishedAt: '2031-01-25T08:00:00Z',
  },
  {
    kind: 'partnership',
    text: 'Nordlicht partners with "Polar Freight" on Baltic routes',
    snippet: 'Nordlicht partners with "Polar Freight" on Baltic routes',
    publishedAt: '2031-01-15T08:00:00Z',
  },
  {
    kind: 'news',
    text: 'What we learned from a winter of night shifts?',
    snippet: 'What we learned from a winter of night shifts?',
    publishedAt: '2031-01-05T08:00:00Z',
  },
  { kind: 'hiring', text: 'Hiring: Senior Warehouse Automation Engineer', snippet: 'Senior Warehouse Automation Engineer' },
  {
    kind: 'hiring',
    text: "We're hiring across operations and engineering as we open new hubs.",
    snippet: "We're hiring across operations and engineering as we open new hubs.",
  },
  {
    kind: 'challenge',
    text: 'Manual temperature logs slow our night shifts down',
    snippet: 'Manual temperature logs slow our night shifts down',
  },
  { kind: 'product', text: 'Cold-chain visibility for every pallet', snippet: 'Cold-chain visibility for every pallet' },
  { kind: 'customers', text: 'Trusted by 120 grocers across northern Europe.', snippet: 'Trusted by 120 grocers across northern Europe.' },
  {
    kind: 'description',
    text: 'Nordlicht Logistics runs temperature-controlled warehouses for grocers',
    snippet: 'Nordlicht Logistics runs temperature-controlled warehouses for grocers',
  },
  { kind: 'founded', text: 'Founded in 2014', snippet: '2014' },
  {
    kind: 'founded',
    text: 'Nordlicht was founded in 2014 by two former truck drivers.',
    snippet: 'Nordlicht was founded in 2014 by two former truck drivers.',
  },
  { kind: 'headquarters', text: 'Located in Hamburg, Germany', snippet: 'Hamburg, Germany' },
  { kind: 'employees', text: 'About 340 employees', snippet: '340' },
  { kind: 'employees', text: 'Our 340 people work across six hubs.', snippet: 'Our 340 people work across six hubs.' },
  { kind: 'industry', text: 'Industry: Cold-chain logistics', snippet: 'Cold-chain logistics' },
  { kind: 'technology', text: 'Built on an open telemetry stack', snippet: 'Built on an open telemetry stack' },
];

/** The research the facts come from: each fact's source at its sourceIndex (other indexes are pages that state nothing used here). */
function research(facts: Fact[]): NonNullable<DraftContext['research']> {
  const size = Math.max(0, ...facts.map((f) => f.sourceIndex));
  const sources: Source[] = Array.from({ length: size }, (_, i) => ({
    url: `https://nordlicht-logistics.example/other-${i + 1}`,
    title: 'Nordlicht Logistics',
    domain: 'nordlicht-logistics.example',
    snippet: 'Cold storage.',
    fetchedAt: FETCHED,
    kind: 'home',
  }));
  for (const f of facts) {
    sources[f.sourceIndex - 1] = {
      url: f.source.url,
      title: f.source.title,
      domain: 'nordlicht-logistics.example',
      snippet: f.source.snippet,
      fetchedAt: FETCHED,
      kind: f.publishedAt ? 'article' : 'home',
    };
  }
  return { runId: 'rsc_test', facts, sources };
}

const factOf = (f: (typeof FACTS)[number], i: number): Fact => ({
  kind: f.kind,
  text: f.text,
  sourceIndex: i + 1,
  source: {
    url: `https://nordlicht-logistics.example/page-${i + 1}`,
    title: f.title ?? (f.publishedAt ? f.text : 'Nordlicht Logistics'),
    domain: 'nordlicht-logistics.example',
    snippet: f.snippet,
    fetchedAt: FETCHED,
  },
  ...(f.publishedAt ? { publishedAt: f.publishedAt } : {}),
});

/** The newest events: ranked before any fact under test. */
const FILLERS = [
  factOf(
    {
      kind: 'funding',
      text: 'Nordlicht closes a €2M seed round',
      snippet: 'Nordlicht closes a €2M seed round',
      publishedAt: '2031-03-01T08:00:00Z',
    },
    100,
  ),
  factOf({ kind: 'launch', text: 'Introducing FrostLink', snippet: 'Introducing FrostLink', publishedAt: '2031-02-28T08:00:00Z' }, 101),
];

const SENDER = senderValues(
  { id: 'mbx_1', email: 'dana@outbound-co.example', name: 'Dana Reyes', deployment: false },
  { name: 'Dana Reyes', email: 'dana@outbound-co.example', title: 'Account Executive' },
  'Outbound Co',
);

function ctx(step: number, facts: Fact[], merge: Partial<MergeValues> = {}): DraftContext {
  return {
    step: BUILTIN[step - 1],
    stepCount: BUILTIN.length,
    research: research(facts),
    known: new Set(['maria', 'jansen', 'nordlicht', 'logistics', 'dana', 'reyes', 'outbound', 'co', 'account', 'executive']),
    contactFunction: null,
    merge: {
      firstName: 'Maria',
      lastName: 'Jansen',
      name: 'Maria Jansen',
      company: 'Nordlicht Logistics',
      title: 'VP Operations',
      listName: 'Cold chain',
      connectionPoint: 'We met at the Hamburg Logistics Summit in March',
      goal: 'Book a demo',
      ...SENDER,
      ...merge,
    },
  };
}

/** A sentence of an email: a capital (or a quote) first, final punctuation (maybe inside closing quotes) last, nothing left unfilled. */
const WHOLE_SENTENCES = /^["“]?[A-Z].*[.!?]["”]?$/;

/** The draft reads as a person wrote it: a greeting, paragraphs of whole sentences, a sign-off with the sender's name (and title, company). */
function expectSendable(body: string, signature: string[]) {
  expect(body).not.toMatch(/\{\{|\}\}|\s[.,!?:]|\.\.(?!\.)|,,| {2}|\n{3}/);
  const paragraphs = body.split('\n\n');
  expect(paragraphs[0]).toMatch(/^Hi (Maria|there),$/);
  const closing = paragraphs[paragraphs.length - 1].split('\n');
  expect(closing[0]).toMatch(/^(Best regards|Best|All the best),$/);
  expect(closing.slice(1)).toEqual(signature);
  for (const p of paragraphs.slice(1, -1)) {
    expect(p, 'a paragraph is one line').not.toContain('\n');
    expect(p, `"${p}" is whole sentences`).toMatch(WHOLE_SENTENCES);
  }
}

describe('the fallback writer: the built-in sequence without a model', () => {
  it('writes a complete, punctuated draft with one cited line for every kind of fact, signed by the pinned mailbox and the list owner', () => {
    const seen = new Set<string>();
    for (const [i, f] of FACTS.entries()) {
      const fact = factOf(f, i);
      for (const step of [1, 2, 3]) {
        // The fact under test is the one this step uses (step n uses the n-th best fact: newer events rank first).
        const filler = FILLERS.slice(0, step - 1);
        const facts = step === 1 ? [fact] : [...filler, fact];
        const written = writeFallback(ctx(step, facts));
        const signature = step === 1 ? ['Dana Reyes', 'Account Executive', 'Outbound Co'] : ['Dana', 'Outbound Co'];
        expectSendable(written.body, signature);
        expect(written.citations, `${f.kind} step ${step}`).toHaveLength(1);
        const line = written.citations[0].text;
        expect(written.body.split('\n\n')[1], 'the cited line follows the greeting').toBe(line);
        expect(line).toMatch(WHOLE_SENTENCES);
        expect(line.startsWith(step > 1 ? 'I also ' : 'I ')).toBe(true);
        expect(written.citations[0].sourceIndex).toBe(fact.sourceIndex);
        expect(written.flags, `${f.kind}: "${line}"`).toEqual([]);
        // The suite's own check: every number, name and date of the cited line is in its snippet or title.
        const cited = written.citations.map((c) => ({ text: c.text, sourceSnippet: c.snippet, sourceTitle: fact.source.title }));
        expect(citationProblems({ citations: cited })).toEqual([]);
        expect(written.subject).toBe('A quick idea for Nordlicht Logistics');
        seen.add(line);
      }
    }
    expect(seen.size).toBe(FACTS.length * 2); // a line per fact, and its "I also" form for later steps
    // A few lines as a reader sees them.
    const line = (i: number) => sentenceFor(factOf(FACTS[i], i));
    expect(line(0)).toBe('I saw the news of your funding: "Nordlicht Logistics raises €18M to automate cold-chain hubs in a Series B".');
    expect(line(4)).toBe('I saw your partnership announcement: "Nordlicht partners with “Polar Freight” on Baltic routes".');
    expect(line(5)).toBe('I read your announcement: "What we learned from a winter of night shifts?"');
    expect(line(6)).toBe('I noticed you are hiring for the Senior Warehouse Automation Engineer role.');
    expect(line(9)).toBe('I read about "Cold-chain visibility for every pallet" on your product page.');
    expect(line(12)).toBe('I read that your company was founded in 2014.');
    expect(line(14)).toBe('I read that your team is based in Hamburg, Germany.');
    expect(line(11)).toBe(
      'I read how you describe your company: "Nordlicht Logistics runs temperature-controlled warehouses for grocers".',
    );
  });

  it('stays whole without research, a company, a connection point or a sender title', () => {
    const bare = writeFallback({
      ...ctx(1, []),
      research: null,
      merge: { ...ctx(1, []).merge, firstName: null, company: null, connectionPoint: null, 'sender.title': null },
    });
    expectSendable(bare.body, ['Dana Reyes', 'Outbound Co']);
    expect(bare.citations).toEqual([]);
    expect(bare.subject).toBe('A quick idea for your team');
    expect(bare.body).toBe(
      "Hi there,\n\nI'm Dana from Outbound Co.\n\nWould you be open to a 15-minute call next week?\n\nBest regards,\nDana Reyes\nOutbound Co",
    );
    const full = writeFallback(ctx(1, [factOf(FACTS[0], 0)]));
    expect(full.body).toBe(
      [
        'Hi Maria,',
        '',
        'I saw the news of your funding: "Nordlicht Logistics raises €18M to automate cold-chain hubs in a Series B".',
        '',
        'We met at the Hamburg Logistics Summit in March.',
        '',
        "I'm Dana from Outbound Co. I'd like to learn what Nordlicht Logistics is focused on this quarter and share how teams like yours work with us.",
        '',
        'Would you be open to a 15-minute call next week?',
        '',
        'Best regards,',
        'Dana Reyes',
        'Account Executive',
        'Outbound Co',
      ].join('\n'),
    );
  });

  it("signs with the mailbox's name, the owner's title only when the owner is that person, else the owner's name", () => {
    const owner = { name: 'Sam Lee', email: 'sam@outbound-co.example', title: 'Head of Sales' };
    const box = (name: string | null, email = 'dana@outbound-co.example', deployment = false) => ({ id: 'm', email, name, deployment });
    expect(senderValues(box('Dana Reyes'), owner, 'Outbound Co')).toEqual({
      'sender.firstName': 'Dana',
      'sender.name': 'Dana Reyes',
      'sender.title': null,
      'sender.company': 'Outbound Co',
    });
    expect(senderValues(box('Sam Lee'), owner, 'Outbound Co')['sender.title']).toBe('Head of Sales');
    expect(senderValues(box('Sam L.', 'sam@outbound-co.example'), owner, 'Outbound Co')['sender.title']).toBe('Head of Sales');
    // The deployment sender and an unnamed mailbox sign with the owner.
    for (const m of [box('Outbound', 'outbound@localhost', true), box(null), null]) {
      expect(senderValues(m, owner, 'Outbound Co')).toMatchObject({
        'sender.firstName': 'Sam',
        'sender.name': 'Sam Lee',
        'sender.title': 'Head of Sales',
      });
    }
  });
});

describe('merge fields', () => {
  it('fills sender fields, leaves out a signature line without a value, and ends a connection point with a period', () => {
    const values: MergeValues = { ...ctx(1, []).merge, 'sender.title': null, connectionPoint: 'We met at SaaStr' };
    const r = fillMergeFields('{{connectionPoint}}\n\nBest,\n{{ SENDER.FIRST_NAME }}\n{{sender.title}}\n{{sender.company}}', values);
    expect(r.text).toBe('We met at SaaStr.\n\nBest,\nDana\nOutbound Co');
    expect(r.repaired).toEqual([]);
    expect(fillMergeFields('{{connectionPoint}} Nice to meet you.', { ...values, connectionPoint: 'We met at SaaStr!' }).text).toBe(
      'We met at SaaStr! Nice to meet you.',
    );
    // A left-out paragraph leaves no gap.
    expect(fillMergeFields('Hi,\n\n{{connectionPoint}}\n\nCall?', { ...values, connectionPoint: null }).text).toBe('Hi,\n\nCall?');
  });

  it('documents every merge field the code fills, and no other (docs/sequences-and-drafts.md)', () => {
    const doc = fs.readFileSync(path.join(import.meta.dirname, '..', 'docs', 'sequences-and-drafts.md'), 'utf8');
    const section = doc.slice(doc.indexOf('## Merge fields'));
    const rows = section
      .split('\n')
      .filter((l) => /^\| `\{\{/.test(l))
      .map((l) => l.split('|').map((c) => c.trim()));
    const documented = Object.fromEntries(
      rows.map((cells) => [/\{\{(.+?)\}\}/.exec(cells[1])![1], [...cells[3].matchAll(/`\{\{(.+?)\}\}`/g)].map((m) => m[1])]),
    );
    expect(documented).toEqual(MERGE_FIELDS);
  });
});
