// Reads a draft sentence by sentence and says which need a person's acknowledgement, and why:
//   unsupported-claim  a statement about the prospect that no cited source supports;
//   offer              an offer, price, discount, free thing, guarantee, deadline or payment request
//                      that is not in the template or the list's context (a citation never clears it);
//   sender-claim       a claim about the sender (customers, results, history, ...) or a figure the
//                      sender vouches for, that is not in the template or the list's context.
// The sender's own words are not flagged: sentences verbatim from the template, greetings and the
// names in them, sign-offs and the signature, meeting proposals (their days, times and durations),
// calls to action, remarks about the email itself.
import { collapse } from '../platform/text.js';
import { type CitedSource, type Claim, claimsOf, foldText, isDistinctEvent, unsupported } from './claims.js';
import { alteredOwnTerms, newOfferTerms, newSenderClaims, type OwnMaterial, ownMaterial, senderClause, termsOf } from './offers.js';
import {
  FIRST_PERSON,
  GERMAN,
  greetingLength,
  guessAboutProspect,
  HEDGE,
  INTENT,
  isMeetingProposal,
  isQuestion,
  isSignatureLine,
  isSignOff,
  isTagQuestion,
  META_COUNT,
  OBSERVATION,
  POSTSCRIPT,
  SECOND_PERSON,
} from './own-words.js';
import { reversedRelations } from './relations.js';

export type FlagKind = 'unsupported-claim' | 'offer' | 'sender-claim';

export interface Flag {
  kind: FlagKind;
  sentence: string;
  claims: string[];
}

export interface JudgeInput {
  templateSubject: string;
  templateBody: string;
  citations: Array<{ text: string; sourceIndex: number }>;
  evidence: (sourceIndex: number) => CitedSource[];
  known: ReadonlySet<string>;
  listContext?: ReadonlyArray<string | null>;
  senderNames?: ReadonlyArray<string>;
}

const fold = (s: string) => collapse(s).toLowerCase();
const segmenter = new Intl.Segmenter('en', { granularity: 'sentence' });
/** Abbreviations a sentence does not end at ("Dr. Patel", "Kelp & Co. team"). */
const ABBREVIATION = /(?:^|[\s(])(?:Dr|Mr|Mrs|Ms|Mx|Prof|Sr|Sra|Srta|St|Co|Inc|Ltd|Corp|Jr|vs|etc|e\.g|i\.e|approx|No|Nr|Hr|Fr)\.$/;

/** The sentences of a line with where each starts, not split after an abbreviation. */
function segments(line: string): Array<{ text: string; index: number }> {
  const out: Array<{ text: string; index: number }> = [];
  for (const s of segmenter.segment(line)) {
    const prev = out[out.length - 1];
    if (prev && ABBREVIATION.test(prev.text.trimEnd())) prev.text += s.segment;
    else out.push({ text: s.segment, index: s.index });
  }
  return out
    .map((s) => ({ text: s.text.trim(), index: s.index + (s.text.length - s.text.trimStart().length) }))
    .filter((s) => s.text.length > 0);
}

interface Part {
  /** The sentence as written (what a citation quotes and a flag names). */
  sentence: string;
  /** What is judged: the sentence less a greeting that opens it. */
  text: string;
  /** A sign-off or signature line: only offers are looked for. */
  signature: boolean;
}

/** A body's sentences; a greeting opening a line is left out of what is judged, the sign-off and signature are marked. */
function partsOf(body: string): Part[] {
  const lines = body.split('\n');
  let signOff = -1;
  for (let i = lines.length - 1; i >= 0; i -= 1) {
    if (isSignOff(lines[i]) && lines.slice(i + 1).filter((l) => l.trim() !== '').length <= 6) {
      signOff = i;
      break;
    }
  }
  const parts: Part[] = [];
  let signature = false;
  lines.forEach((raw, i) => {
    if (i === signOff) signature = true;
    let line = raw;
    const ps = POSTSCRIPT.exec(line);
    if (ps) {
      signature = false;
      line = line.slice(ps[0].length);
    }
    if (signature && i > signOff && line.trim() !== '' && !isSignatureLine(line)) signature = false;
    if (signature) {
      if (line.trim()) parts.push({ sentence: line.trim(), text: line.trim(), signature: true });
      return;
    }
    const greeting = greetingLength(line);
    for (const s of segments(line)) {
      const skip = Math.max(0, greeting - s.index);
      parts.push({ sentence: s.text, text: s.text.slice(skip).replace(/^[\s,!:;—–-]+/, ''), signature: false });
    }
  });
  return parts;
}

/** A leading address ("Dana, ...", "Herr Müller, ...", "Panie Łukaszu, ...") is the sender's, not a claim. */
function withoutAddress(text: string, known: ReadonlySet<string>): string {
  const m = /^((?:[\p{Lu}][\p{L}'’.-]*\s+){0,3}[\p{Lu}][\p{L}'’.-]*)(?:,|\s+[—–-])\s+/u.exec(text);
  if (!m) return text;
  const words = m[1].split(/\s+/).map((w) => w.toLowerCase().replace(/\.$/, ''));
  const address = /^(?:herr|frau|monsieur|madame|mr|mrs|ms|dr|sr|sra|señor|señora|pan|pani|panie|hanım|bey|dear)$/;
  return words.some((w) => known.has(w) || address.test(w) || /(?:hanım|bey)$/.test(w)) ? text.slice(m[0].length) : text;
}

/** Text in quotation marks is someone else's words, unless it names the sender. */
function withoutQuotes(text: string, senderNames: ReadonlyArray<string>): string {
  return text.replace(/"[^"]*"|“[^”]*”|«[^»]*»|„[^“”]*[“”]/g, (q) =>
    senderNames.some((n) => n.trim() !== '' && foldText(q).includes(foldText(n))) ? q : ' ',
  );
}

/** A number the email counts itself by ("two quick questions", "a two-page summary"). */
const isMetaCount = (text: string, c: Claim) =>
  c.kind === 'number' && c.value !== undefined && META_COUNT.test(text.slice(c.index + c.token.length));

/** A number in a meeting proposal is a day, time or duration, unless it is the prospect's ("your 40 hires"). */
const isProspectsFigure = (text: string, c: Claim) =>
  /\b(?:your|you(?:'ve| have| had| now have))\b(?:\s+\S+){0,2}\s*$/i.test(text.slice(Math.max(0, c.index - 30), c.index));

/** What a list generation reads once per template and list, not once per draft (a few recent ones are kept). */
const recent = new Map<string, { own: OwnMaterial; template: Set<string> }>();
function templateOf(input: JudgeInput) {
  const key = JSON.stringify([input.templateSubject, input.templateBody, input.listContext ?? []]);
  let t = recent.get(key);
  if (!t) {
    t = {
      own: ownMaterial([input.templateSubject, input.templateBody, ...(input.listContext ?? [])]),
      template: new Set(
        [...input.templateBody.split('\n'), ...partsOf(input.templateBody).map((p) => p.sentence), input.templateSubject].map(fold),
      ),
    };
    if (recent.size >= 32) recent.delete(recent.keys().next().value as string);
    recent.set(key, t);
  }
  return t;
}

export function flagsOf(input: JudgeInput, subject: string, body: string): Flag[] {
  const { own, template } = templateOf(input);
  const senderNames = input.senderNames ?? [];
  const senderWords = new Set(senderNames.flatMap((n) => foldText(n).split(/[^\p{L}\p{N}'’-]+/u)));
  const prospectWords = [...input.known].filter((w) => !senderWords.has(foldText(w)));
  const flags: Flag[] = [];
  const parts = [...segments(subject).map((s) => ({ sentence: s.text, text: s.text, signature: false })), ...partsOf(body)];
  for (const part of parts) {
    if (template.has(fold(part.sentence)) || part.text === '') continue;
    const cited = input.citations
      .filter(
        (c) =>
          fold(c.text) === fold(part.sentence) || fold(part.sentence).includes(fold(c.text)) || fold(c.text).includes(fold(part.sentence)),
      )
      .flatMap((c) => input.evidence(c.sourceIndex));
    flags.push(...judge(part, cited, own, input.known, senderNames, prospectWords));
  }
  return flags;
}

function judge(
  part: Part,
  cited: CitedSource[],
  own: OwnMaterial,
  known: ReadonlySet<string>,
  senderNames: ReadonlyArray<string>,
  prospectWords: string[],
): Flag[] {
  const flags: Flag[] = [];
  const flag = (kind: FlagKind, claims: string[]) => flags.push({ kind, sentence: part.sentence, claims });
  const ownText = withoutQuotes(part.text, senderNames);
  const offer = newOfferTerms(ownText, own);
  if (offer.length > 0) flag('offer', offer);
  if (part.signature) return flags;
  const offering = termsOf(ownText).kinds.size > 0;

  const text = withoutAddress(part.text, known);
  // Scripts written without spaces (Japanese, Chinese) hold names inside longer runs of letters.
  const folded = foldText(text);
  const written = new Set((text.match(/[\p{Lu}][\p{L}\p{N}'-]*/gu) ?? []).map(foldText));
  const mentions = (w: string) =>
    written.has(foldText(w)) || (/[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}]/u.test(w) && folded.includes(w));
  const prospect = SECOND_PERSON.test(text) || prospectWords.some(mentions) || OBSERVATION.test(text);
  const intent = INTENT.test(text);
  const all = claimsOf(text, known);
  const metaValues = all.filter((c) => isMetaCount(text, c)).map((c) => c.value);
  let claims = all.filter((c) => !isMetaCount(text, c));
  // The sender's own names, places and dates (template, list context) are not claims.
  claims = claims.filter((c) => !((c.kind === 'name' || c.kind === 'date') && ownHas(own, c)));

  if (offering) {
    // The offer's figures and dates are its terms; a name there is a claim when it speaks of the prospect.
    if (!prospect) return flags;
    claims = claims.filter((c) => c.kind === 'name');
  }
  const meeting = isMeetingProposal(text) && !isTagQuestion(text);
  // The sender's own sentence, reworded with another duration: a new term of the sender's.
  const altered = offering || meeting || isQuestion(text) ? null : alteredOwnTerms(ownText, own);
  if (altered) {
    flag(altered.offer ? 'offer' : 'sender-claim', altered.changed);
    return flags;
  }
  // A guess at the prospect ("I'm guessing your team ...") speaks of them, not of the sender.
  const guess = offering || meeting ? null : guessAboutProspect(text, (s) => prospectWords.some((w) => foldText(s).includes(foldText(w))));
  const clause = offering || meeting || guess ? null : senderClause(text, senderNames);
  if (clause !== null && !INTENT.test(clause) && !OBSERVATION.test(text)) {
    // Names in quotation marks are someone else's words, not the sender's claim.
    const names = claimsOf(ownText, known)
      .filter((c) => c.kind === 'name' && !ownHas(own, c))
      .map((c) => c.token);
    const missing = newSenderClaims(ownText, names, own, { skipValues: (v) => metaValues.includes(v) });
    if (missing.length > 0) flag('sender-claim', missing);
    return flags;
  }

  const tag = isTagQuestion(text);
  const question = isQuestion(text) && !tag;
  // A capitalized word alone in German is as often a noun as a name.
  const noun = (c: Claim) => c.kind === 'name' && c.single === true && GERMAN.test(text);
  // After an article (and its adjectives) it is a noun wherever it stands: "eine beachtliche Größe".
  claims = claims.filter((c) => !(noun(c) && GERMAN_ARTICLE.test(text.slice(Math.max(0, c.index - 60), c.index))));
  if (meeting) {
    const firstPerson = FIRST_PERSON.test(text.split(/\s+/)[0] ?? '');
    claims = claims.filter(
      (c) =>
        (c.kind === 'number' && isProspectsFigure(text, c)) ||
        (c.kind === 'name' && !noun(c) && !firstPerson) ||
        (c.kind === 'recency' && prospect && !intent) ||
        (c.presupposed === true && !firstPerson),
    );
  } else if (question) {
    claims = claims.filter(
      (c) =>
        (c.kind === 'name' && !noun(c)) || c.kind === 'number' || c.kind === 'date' || (c.kind === 'recency' && c.presupposed === true),
    );
  }
  const hedged = HEDGE.test(text);
  if (!prospect || intent || hedged) claims = claims.filter((c) => c.kind !== 'recency' || (c.presupposed === true && !intent));

  const checkable = claims.filter((c) => c.kind !== 'event');
  if (checkable.length > 0) {
    claims = claims.filter((c) => c.kind !== 'event' || isDistinctEvent(c));
  } else if (guess) {
    // A guess at the prospect with nothing checkable ("I imagine your team is growing fast"): a
    // statement of it, so it needs a cited source whose words it mostly uses.
    if (cited.length === 0) flag('unsupported-claim', [guess]);
    else return unsupportedStatement(text.replace(guess, ''), guess, cited, own, flag, flags);
    return flags;
  } else if (!offering && prospect && !intent && !question && !hedged) {
    // A statement about the prospect with nothing checkable but its event ("Acme is investing heavily
    // in outbound") or an observation ("I noticed your reps ..."). Without either, a sentence about
    // the reader ("Your time is valuable") is read as courtesy, not as a claim.
    claims = claims.filter((c) => c.kind === 'event');
    const seen = OBSERVATION.exec(text)?.[0];
    if (claims.length === 0 && seen) return unsupportedStatement(text.replace(seen, ''), seen, cited, own, flag, flags);
  } else claims = [];

  // Every name and event right, the parties swapped ("Harbor Lane acquired Orbis" for "Orbis acquired Harbor Lane").
  const reversed = offering || meeting ? [] : reversedRelations(text, cited);
  if (claims.length === 0 && reversed.length === 0) return flags;
  // A figure in a sentence about nobody in particular, uncited: the sender vouches for it.
  // (Unless a name comes first: "Ruth Adeyemi mentioned ... 2026" speaks of that person.)
  const figure = claims.find((c) => c.kind === 'number' && c.value !== undefined);
  const named = claims.find((c) => c.kind === 'name');
  if (cited.length === 0 && !prospect && !intent && figure && !(named && named.index < figure.index)) {
    const names = claims.filter((c) => c.kind === 'name').map((c) => c.token);
    const missing = newSenderClaims(ownText, names, own, { skipValues: (v) => metaValues.includes(v) });
    if (missing.length > 0) flag('sender-claim', missing);
    return flags;
  }
  const missing = [...unsupported(claims, cited).map((c) => c.token), ...reversed.map((r) => `${r} (the source says the reverse)`)];
  if (missing.length > 0) flag('unsupported-claim', [...new Set(missing)]);
  return flags;
}

const GERMAN_ARTICLE =
  /(?<![\p{L}])(?:der|die|das|dem|den|des|ein|eine|einer|einen|einem|eines|zur|zum|im|am|beim|vom|ins|kein\p{L}*|ihr\p{L}*|unser\p{L}*|sein\p{L}*|mein\p{L}*|dies\p{L}*|jede\p{L}*)\s+(?:[\p{Ll}]+\s+){0,2}$/u;

const ownHas = (own: OwnMaterial, c: Claim) => foldText(own.text).includes(foldText(c.token));

/**
 * A statement with nothing checkable in it ("I noticed your reps still research accounts by hand"):
 * most of its words must be its cited source's, or the sender's own material's (the list's context).
 */
function unsupportedStatement(
  text: string,
  marker: string,
  cited: CitedSource[],
  own: OwnMaterial,
  flag: (kind: FlagKind, claims: string[]) => void,
  flags: Flag[],
): Flag[] {
  const support = new Set(
    foldText(`${cited.map((c) => `${c.title} ${c.snippet}`).join(' ')} ${own.text}`)
      .split(/[^\p{L}]+/u)
      .map((w) => w.slice(0, 5)),
  );
  const words = foldText(text)
    .split(/[^\p{L}]+/u)
    .filter((w) => w.length > 3);
  const found = words.filter((w) => support.has(w.slice(0, 5))).length;
  if (found * 2 < words.length || words.length === 0) flag('unsupported-claim', [marker]);
  return flags;
}
