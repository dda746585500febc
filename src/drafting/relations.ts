// Who did what to whom. A sentence naming two parties of something its cited source reports must
// not swap them: "I saw Harbor Lane acquired Orbis" cites the source "Orbis has acquired Harbor
// Lane" with every name and the event right, and states the reverse. Read without a parser, in the
// languages drafts are written in: the parties are the names the sentence and its source share;
// the relation is the first word after the first party (or, when none stands between them, the
// first after the second, as German puts its verb last: "dass A B übernommen hat"; or, in "the
// acquisition of A by B", the word before both); the party
// before the relation acts, unless a passive marker ("by", "por", "par", "durch", "wurde … von")
// names the other. Relations are compared by their word ("bought" is "acquired"), and one that
// reads both ways (a partnership, a merger) is never reversed. The sentence is
// reversed when its source has the same relation between the same two parties only the other way
// round.
import { type CitedSource, eventKindOf } from './claims.js';
import { isDateWord } from './own-words.js';

interface Token {
  /** Folded, without a possessive ("Grid's" is "grid"). */
  key: string;
  capital: boolean;
  start: number;
  end: number;
}

const fold = (s: string) => s.normalize('NFD').replace(/\p{M}/gu, '').toLowerCase();

function tokensOf(text: string): Token[] {
  return [...text.matchAll(/[\p{L}\p{N}]+(?:['’-][\p{L}\p{N}]+)*/gu)].map((m) => {
    // An elided article or pronoun is no part of the name after it ("qu'Alpiniste", "d'Alpiniste").
    const elided = /^(?:qu|d|l|j|n|s|c|dell|all|sull)['’](?=\p{Lu})/iu.exec(m[0])?.[0].length ?? 0;
    const word = m[0].slice(elided);
    return {
      key: fold(word).replace(/['’]s$/, ''),
      capital: /^\p{Lu}/u.test(word),
      start: (m.index ?? 0) + elided,
      end: (m.index ?? 0) + m[0].length,
    };
  });
}

/** Capitalized for grammar, not as a name: articles, pronouns and the like. */
const NOT_NAMES = new Set(
  "i ich je yo eu io ik we wir nous the a an el la los las le les l o os as il lo gli der die das dem den des ein eine de da do del van von vi saw congrats congratulations i'm i've i'd it this that our your".split(
    ' ',
  ),
);
/** Words that say nothing of the relation: auxiliaries, pronouns, articles, prepositions. */
const FUNCTION_WORDS = new Set(
  (
    'have has had will would been being was were are is its their his her our your that with from into onto this these those ' +
    'also just then than when which while about after before over under very most much more some such only ' +
    'hat habe haben hatte wird wurde wurden worden sind ist dass mit für von vom zum zur nach über unter beim einen einem einer eines ' +
    'ha han hemos había fue fueron sido esta este estos para con como pelo pela pelos pelas foi foram tem têm tinha sua seu suas seus ' +
    'avec pour dans sont était été ont avait leur leurs cette ' +
    'will shall could should might must'
  ).split(' '),
);
const CONNECTORS = new Set(['and', '&', 'und', 'y', 'e', 'et', 'or', 'oder', 'o', 'ou', 'en', 'und']);
/** A passive marker right before a party makes it the one who acts ("acquired by X", "comprada por X"). */
const PASSIVE = /(?:^|[\s,])(?:by|por|pela|pelo|par|durch)\s+(?:the\s+|la\s+|el\s+|le\s+|l['’]|a\s+|o\s+|der\s+|die\s+|den\s+|dem\s+)?$/iu;
const GERMAN_PASSIVE = /(?<![\p{L}])(?:wurde|wurden|worden)(?![\p{L}]).*(?<![\p{L}])von\s+(?:der\s+|die\s+|den\s+|dem\s+)?$/iu;
/**
 * A relation's key: its word's first five letters, or "acquisition" for any word of one ("bought",
 * "acquired", "übernommen", "rachat"), whose words all point the same way (where "raised from" and
 * "invested in", "hired" and "joined" point opposite ways).
 */
const stem = (w: string) => (eventKindOf(w) === 'acquisition' ? 'acquisition' : w.slice(0, 5));
/** Auxiliaries: a verb-second clause ("Datenwerk hat Nordlicht übernommen") has only these between its parties. */
const AUXILIARIES = new Set('hat haben hatte has have had ha han hemos a ont avait foi tem ist sind wird wurde was were is are'.split(' '));
/** Relations that read both ways: a partnership, a merger. */
const SYMMETRIC = new Set(['partnership']);
const MERGER = /^(?:merg|fusi|fusã|fusio)/;
const isRelationWord = (t: Token) => t.key.length >= 4 && !FUNCTION_WORDS.has(t.key) && !/^\p{N}/u.test(t.key);

interface Party {
  name: string;
  /** Index of its first and last token. */
  from: number;
  to: number;
}

/** Where a run of name tokens stands in a token list, every time. */
function occurrences(run: string[], tokens: Token[]): number[] {
  const out: number[] = [];
  for (let i = 0; i + run.length <= tokens.length; i += 1)
    if (run.every((k, j) => tokens[i + j].key === k && tokens[i + j].capital)) out.push(i);
  return out;
}

/** The relation between two parties in a text: its word's stem, and whether the earlier party acts. */
function relation(text: string, tokens: Token[], first: Party, second: Party): { stem: string; earlierActs: boolean } | null {
  const between = tokens.slice(first.to + 1, second.from);
  if (between.length > 0 && between.every((t) => CONNECTORS.has(t.key))) return null;
  const gap = text.slice(tokens[first.to].end, tokens[second.from].start);
  const passive = PASSIVE.test(gap) || GERMAN_PASSIVE.test(gap);
  // "A B übernommen hat": the verb after both; "the acquisition of A by B": the noun before both.
  const word =
    between.find(isRelationWord) ??
    (between.every((t) => AUXILIARIES.has(t.key)) ? tokens.slice(second.to + 1).find(isRelationWord) : undefined) ??
    (passive
      ? tokens
          .slice(Math.max(0, first.from - 3), first.from)
          .reverse()
          .find(isRelationWord)
      : undefined);
  if (!word || SYMMETRIC.has(eventKindOf(word.key) ?? '') || MERGER.test(word.key)) return null;
  return { stem: stem(word.key), earlierActs: !passive };
}

/** Whether a stem is the relation between two parties in a source text, and who acts there: true when the earlier one. */
function sourceOrientations(text: string, a: string[], b: string[], relStem: string): Array<'a' | 'b'> {
  const tokens = tokensOf(text);
  const out: Array<'a' | 'b'> = [];
  for (const pa of occurrences(a, tokens))
    for (const pb of occurrences(b, tokens)) {
      const A = { name: '', from: pa, to: pa + a.length - 1 };
      const B = { name: '', from: pb, to: pb + b.length - 1 };
      const [first, second] = pa < pb ? [A, B] : [B, A];
      if (first.to >= second.from) continue;
      // The stem anywhere between them, or after both in the same sentence.
      const between = tokens.slice(first.to + 1, second.from);
      const tail = text.slice(tokens[second.to].end).split(/[.!?;]/)[0];
      const inTail = tokensOf(tail).some((t) => stem(t.key) === relStem && isRelationWord(t));
      const gap = text.slice(tokens[first.to].end, tokens[second.from].start);
      const earlierActs = !(PASSIVE.test(gap) || GERMAN_PASSIVE.test(gap));
      const before = !earlierActs && tokens.slice(Math.max(0, first.from - 3), first.from).some((t) => stem(t.key) === relStem);
      if (!between.some((t) => stem(t.key) === relStem) && !inTail && !before) continue;
      const earlierIsA = first === A;
      out.push(earlierActs === earlierIsA ? 'a' : 'b');
    }
  return out;
}

/**
 * The relations a sentence states the other way round from every cited source that states them,
 * as "<who acts> <relation word> <the other>"; empty when none is reversed.
 */
export function reversedRelations(sentence: string, cited: CitedSource[]): string[] {
  if (cited.length === 0) return [];
  const texts = cited.flatMap((c) => [c.title, c.snippet]);
  const sourceTokens = texts.map(tokensOf);
  const tokens = tokensOf(sentence);
  // Name tokens the sentence shares with a source, grouped into parties where they stand together in both.
  const named = (t: Token) =>
    t.capital && !NOT_NAMES.has(t.key) && !isDateWord(t.key) && sourceTokens.some((ts) => ts.some((s) => s.capital && s.key === t.key));
  const adjacentInSource = (x: string, y: string) =>
    sourceTokens.some((ts) => ts.some((s, i) => s.key === x && ts[i + 1]?.key === y && ts[i + 1].capital));
  const parties: Party[] = [];
  tokens.forEach((t, i) => {
    if (!named(t)) return;
    const last = parties[parties.length - 1];
    if (last && last.to === i - 1 && adjacentInSource(tokens[i - 1].key, t.key)) {
      last.to = i;
      last.name = sentence.slice(tokens[last.from].start, t.end);
    } else parties.push({ name: sentence.slice(t.start, t.end), from: i, to: i });
  });
  const keys = (p: Party) => tokens.slice(p.from, p.to + 1).map((t) => t.key);
  const out: string[] = [];
  for (let i = 0; i < parties.length; i += 1)
    for (let j = i + 1; j < parties.length; j += 1) {
      const [a, b] = [parties[i], parties[j]];
      const rel = relation(sentence, tokens, a, b);
      if (!rel) continue;
      const [actor, other] = rel.earlierActs ? [a, b] : [b, a];
      const seen = texts.flatMap((text) => sourceOrientations(text, keys(actor), keys(other), rel.stem));
      if (seen.length > 0 && seen.every((who) => who === 'b')) {
        const word = tokens.find((t) => stem(t.key) === rel.stem && isRelationWord(t));
        out.push(`${actor.name} ${word ? sentence.slice(word.start, word.end) : '…'} ${other.name}`);
      }
    }
  return out;
}
