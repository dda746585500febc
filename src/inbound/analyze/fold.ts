// Text folded for matching: compatibility-decomposed with accents dropped, lowercased, typographic
// apostrophes as ', ß as ss, whitespace runs as one space. "Réponse automatique" and
// "reponse automatique" fold alike, so the phrase tables are written once, without accents.

const MARKS = /[\u0300-\u036f]/g;
const APOSTROPHES = /[\u2018\u2019\u02bc\u0060\u00b4]/g;
const SPACES = /\s+/g;

export function fold(s: string): string {
  return s.normalize('NFKD').replace(MARKS, '').toLowerCase().replace(APOSTROPHES, "'").replace(/ß/g, 'ss').replace(SPACES, ' ');
}

/** Folded, and trimmed of spaces and of the given punctuation at both ends (no regex: bounded work on any input). */
export function foldTrim(s: string, punctuation = ' '): string {
  const f = fold(s);
  let a = 0;
  let b = f.length;
  while (a < b && (f[a] === ' ' || punctuation.includes(f[a]))) a += 1;
  while (b > a && (f[b - 1] === ' ' || punctuation.includes(f[b - 1]))) b -= 1;
  return f.slice(a, b);
}
