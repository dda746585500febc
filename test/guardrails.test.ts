// The guardrails, claims and merge fields on their own.
import { describe, expect, it } from 'vitest';
import { claimsOf, unsupported } from '../src/drafting/claims.js';
import { insertAfterOpening } from '../src/drafting/fallback.js';
import { checkDraft, type GuardrailInput } from '../src/drafting/guardrails.js';
import { fillMergeFields, type MergeValues, SUBJECT_FALLBACKS } from '../src/drafting/merge.js';

const known = new Set(['dana', 'whitfield', 'acme', 'rockets']);
const base = (over: Partial<GuardrailInput> = {}): GuardrailInput => ({
  step: 1,
  subject: 'A quick idea',
  body: 'Hi Dana,\n\nWe help teams book meetings.\n\nBest,\nSam',
  templateSubject: 'A quick idea',
  templateBody: 'Hi Dana,\n\nWe help teams book meetings.\n\nBest,\nSam',
  citations: [],
  evidence: () => [],
  known,
  ...over,
});

describe('claims', () => {
  it('finds numbers, names, dates, recency and events, in order, and leaves known words and grammar alone', () => {
    expect(claimsOf('Congrats on your 500 new customers in Berlin last week.', known).map((c) => [c.kind, c.token])).toEqual([
      ['number', '500'],
      ['name', 'Berlin'],
      ['recency', 'last week'],
    ]);
    expect(claimsOf('Hi Dana, Acme Rockets looks great.', known)).toEqual([]);
    expect(claimsOf('I saw that Orbital Ventures led your round in March.', known).map((c) => c.token)).toEqual([
      'Orbital Ventures',
      'round',
      'March',
    ]);
    expect(claimsOf('Would a short call next week be useful?', known)).toEqual([]);
  });

  it('is supported by a cited snippet that states it (numbers by their digits, recency by a dated source)', () => {
    const claims = claimsOf('I saw the news "Acme raises $40M Series B" recently.', known);
    expect(
      unsupported(claims, [{ snippet: 'Acme raises $40M Series B led by Orbital Ventures.', title: 'Series B', dated: true }]),
    ).toEqual([]);
    expect(unsupported(claims, [{ snippet: 'Acme raises 40 million dollars.', title: 'x', dated: false }]).map((c) => c.token)).toEqual([
      'Series B',
      'recently',
    ]);
    expect(unsupported(claims, []).length).toBe(claims.length);
  });
});

describe('checkDraft', () => {
  it("never flags the template's own sentences, even with numbers and names", () => {
    const t = 'Hi Dana,\n\nWe helped 200 teams at Globex and Initech grow 3x in 2025.';
    expect(checkDraft(base({ body: t, templateBody: t })).flags).toEqual([]);
  });

  it('flags an uncited claim about the prospect and clears a cited one', () => {
    const claim = 'Congrats on your 500 new customers in Berlin.';
    const body = `Hi Dana,\n\n${claim}\n\nWe help teams book meetings.`;
    expect(checkDraft(base({ body })).flags).toEqual([
      { kind: 'unsupported-claim', sentence: claim, claims: ['Congrats', '500', 'Berlin'] },
    ]);
    const cited = checkDraft(
      base({
        body,
        citations: [{ text: claim, sourceIndex: 1 }],
        evidence: (n) => (n === 1 ? [{ snippet: 'Acme now serves 500 new customers in Berlin.', title: 'News', dated: true }] : []),
      }),
    );
    expect(cited.flags).toEqual([]);
    const wrongSource = checkDraft(
      base({
        body,
        citations: [{ text: claim, sourceIndex: 2 }],
        evidence: (n) => (n === 1 ? [{ snippet: '500 Berlin', title: '', dated: true }] : []),
      }),
    );
    expect(wrongSource.flags).toHaveLength(1);
  });

  it('flags a cited relation stated the other way round, a guess about the prospect and what a question takes for granted', () => {
    const orbis = {
      snippet: 'Orbis Freight has acquired Harbor Lane Logistics, adding 14 terminals.',
      title: 'Orbis Freight acquires Harbor Lane',
      dated: true,
    };
    const cites = (sentence: string, source = orbis) =>
      checkDraft(
        base({
          body: `Hi Dana,\n\n${sentence}\n\nWe help teams book meetings.`,
          citations: [{ text: sentence, sourceIndex: 1 }],
          evidence: (n) => (n === 1 ? [source] : []),
        }),
      ).flags.map((f) => [f.kind, f.claims]);
    const says = (sentence: string) =>
      checkDraft(base({ body: `Hi Dana,\n\n${sentence}\n\nWe help teams book meetings.` })).flags.map((f) => f.kind);
    // Who did what to whom, in active and passive voice, in German with its verb last.
    expect(cites('I saw Harbor Lane Logistics acquired Orbis Freight.')).toEqual([
      ['unsupported-claim', ['Harbor Lane Logistics acquired Orbis Freight (the source says the reverse)']],
    ]);
    expect(cites('Orbis Freight was bought by Harbor Lane Logistics, I hear.')).toHaveLength(1);
    expect(cites('I saw Orbis Freight acquired Harbor Lane Logistics.')).toEqual([]);
    expect(cites('Harbor Lane Logistics was bought by Orbis Freight, I hear.')).toEqual([]);
    expect(cites("Orbis Freight's acquisition of Harbor Lane Logistics is a big step.")).toEqual([]);
    const brueckner = {
      snippet: 'Die Brückner GmbH hat den Hersteller Hessel Antriebe übernommen.',
      title: 'Brückner übernimmt Hessel Antriebe',
      dated: true,
    };
    expect(cites('Ich habe gelesen, dass Hessel Antriebe Brückner übernommen hat.', brueckner)).toHaveLength(1);
    expect(cites('Glückwunsch zur Übernahme von Hessel Antriebe!', brueckner)).toEqual([]);
    // A partnership reads both ways.
    const summit = {
      snippet: 'Acme Rockets and Summit Labs will offer tracking together.',
      title: 'Acme Rockets partners with Summit Labs',
      dated: true,
    };
    expect(cites('I saw that Summit Labs is partnering with Acme Rockets.', summit)).toEqual([]);
    // A guess about the prospect is a statement of it; a guess about the email, a condition or a question is not.
    for (const guess of [
      'I imagine your team is growing fast.',
      'Your sales cycle is probably longer than it should be.',
      "It's likely your intake team is swamped.",
      'Supongo que estáis contratando mucho este año.',
      "J'imagine que vos équipes sont très sollicitées.",
    ])
      expect(says(guess), guess).toEqual(['unsupported-claim']);
    for (const own of [
      'I imagine this is not a priority right now.',
      'Perhaps your team already has a tool for this?',
      'If your team is growing, this may help.',
    ])
      expect(says(own), own).toEqual([]);
    // What a question takes for granted.
    expect(says('How is the new office working out?')).toEqual(['unsupported-claim']);
    expect(says('Wie läuft es mit dem neuen Werk?')).toEqual(['unsupported-claim']);
    expect(says('Worth a look before your board meeting next month?')).toEqual(['unsupported-claim']);
    expect(says('Worth a look next month?')).toEqual([]);
  });

  it('repairs what it can (reply prefix on a first step, placeholders, empty or long subject, repeated "!") and advises on the rest', () => {
    const r = checkDraft(
      base({
        subject: `RE: Fwd: ${'Big news '.repeat(20)}`,
        body: 'Hi {{firstName}}!!! Click here for 100% free stuff: http://a.example http://b.example http://c.example http://d.example',
        templateBody: 'x',
      }),
    );
    expect(r.subject.startsWith('Big news')).toBe(true);
    expect(r.subject.length).toBeLessThanOrEqual(120);
    expect(r.body).toBe('Hi! Click here for 100% free stuff: http://a.example http://b.example http://c.example http://d.example');
    expect(r.repaired).toEqual([
      'reply-prefix: a first email is not a reply; "Re:"/"Fwd:" removed from the subject',
      'long-subject: cut to 120 characters',
      'unfilled-merge-field: {{firstName}} removed from the body',
      'exclamation-marks: repeated "!" reduced to one',
    ]);
    expect(r.advisories).toEqual(
      expect.arrayContaining([
        'too-many-links: 4 links (more than 3) look like bulk mail to filters',
        'spam-trigger: "100% free"',
        'spam-trigger: "click here"',
      ]),
    );
    const later = checkDraft(base({ step: 2, subject: 'Re: A quick idea' }));
    expect(later.subject).toBe('Re: A quick idea');
    const empty = checkDraft(base({ subject: '  ', body: '' }));
    expect(empty).toMatchObject({ subject: 'A quick idea', body: base().templateBody });
    expect(checkDraft(base({ subject: 'LIMITED TIME OFFER NOW' })).advisories).toEqual(
      expect.arrayContaining(['all-caps-subject: the subject is in capitals']),
    );
  });
});

describe('merge fields', () => {
  const values: MergeValues = {
    firstName: 'Dana',
    lastName: 'Whitfield',
    name: 'Dana Whitfield',
    company: null,
    title: 'CTO',
    listName: null,
    connectionPoint: null,
    goal: null,
  };
  it('fills known fields, greets with "there", leaves out sentences whose value is missing, removes unknown fields', () => {
    const r = fillMergeFields(
      'Hi {{ first_name }}. {{title}} at {{company}} is a big job. As a {{ Title }}, you decide. {{whatever}}Thanks.',
      values,
    );
    expect(r.text).toBe('Hi Dana. As a CTO, you decide. Thanks.');
    expect(r.unknown).toEqual(['{{whatever}}']);
    expect(fillMergeFields('Hello {{firstName}},', { ...values, firstName: null }).text).toBe('Hello there,');
    expect(fillMergeFields('Ideas for {{company}}', values, SUBJECT_FALLBACKS).text).toBe('Ideas for your team');
  });

  it('adds a personal sentence after a greeting line, else after the first sentence', () => {
    expect(insertAfterOpening('Hi Dana,\n\nWe help.', 'X.')).toBe('Hi Dana,\n\nX.\n\nWe help.');
    expect(insertAfterOpening('Hello, we help teams. Call?', 'X.')).toBe('Hello, we help teams. X. Call?');
  });
});
