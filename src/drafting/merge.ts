// Merge fields of template text: `{{firstName}}`, `{{sender.name}}`... (case-insensitive, spaces
// inside the braces allowed, snake_case accepted). A field whose value is unknown for this contact
// is repaired: in a subject by a neutral word, in a body by "there" for a first name in a
// greeting, otherwise by leaving out the sentence holding it (a signature line of a sender field
// without a value is left out silently: a sender without a title signs without one); an unknown
// field name is removed and reported. docs/sequences-and-drafts.md lists every field (a test
// holds the two to each other).

/** The sender's fields (src/drafting/sender.ts): a writer without a sender leaves them unset. */
export interface SenderValues {
  'sender.firstName': string | null;
  'sender.name': string | null;
  'sender.title': string | null;
  'sender.company': string | null;
}

export interface MergeValues extends Partial<SenderValues> {
  firstName: string | null;
  lastName: string | null;
  name: string | null;
  company: string | null;
  title: string | null;
  listName: string | null;
  connectionPoint: string | null;
  goal: string | null;
}

type Field = keyof MergeValues;

/** Every merge field with the other names it is known by (any case; snake_case of each is accepted too). */
export const MERGE_FIELDS: Record<Field, string[]> = {
  firstName: [],
  lastName: [],
  name: ['fullName'],
  company: ['companyName'],
  title: ['jobTitle'],
  listName: [],
  connectionPoint: [],
  goal: [],
  'sender.firstName': [],
  'sender.name': [],
  'sender.title': [],
  'sender.company': [],
};

/** A field name as matched: lower case, without underscores (so `first_name`, `FirstName` and `firstname` are one). */
const squash = (name: string) => name.toLowerCase().replaceAll('_', '');
const FIELDS = new Map<string, Field>(
  (Object.entries(MERGE_FIELDS) as Array<[Field, string[]]>).flatMap(([field, aliases]) =>
    [field, ...aliases].map((n) => [squash(n), field] as [string, Field]),
  ),
);

/** Fields whose value the operator writes as a sentence: one that ends a sentence gets a period when it has none. */
const SENTENCE_FIELDS = new Set<Field>(['connectionPoint']);
const ENDS_SENTENCE = /[.!?…]["”’')\]]*$/;

const FIELD = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)\s*\}\}/g;

export interface MergeResult {
  text: string;
  /** Repairs made, as guardrail report lines. */
  repaired: string[];
  /** Placeholders that name no field (removed). */
  unknown: string[];
}

/** The first and last name of a full name. */
export function nameParts(full: string | null): { first: string | null; last: string | null } {
  const parts = (full ?? '').trim().split(/\s+/).filter(Boolean);
  return { first: parts[0] ?? null, last: parts.length > 1 ? parts[parts.length - 1] : null };
}

/** Text split into lines, each line into sentences, keeping the line structure of an email. */
const SENTENCE_END = /(?<=[.!?])\s+/;

/** Neutral words a subject uses for a value the contact does not have (a subject is never dropped). */
export const SUBJECT_FALLBACKS: Partial<Record<keyof MergeValues, string>> = {
  firstName: 'there',
  name: 'there',
  company: 'your team',
  title: 'your role',
};

export function fillMergeFields(
  text: string,
  values: MergeValues,
  fallbacks: Partial<Record<keyof MergeValues, string>> = {},
): MergeResult {
  const repaired: string[] = [];
  const unknown: string[] = [];
  const lines = text.split('\n').map((line) =>
    line
      .split(SENTENCE_END)
      .flatMap((sentence) => {
        let drop = false;
        let silent = false;
        const filled = sentence.replace(FIELD, (whole, raw: string, at: number) => {
          const field = FIELDS.get(squash(raw));
          if (!field) {
            unknown.push(whole);
            return '';
          }
          const value = values[field];
          if (value) {
            const endsSentence = sentence.slice(at + whole.length).trim() === '';
            return SENTENCE_FIELDS.has(field) && endsSentence && !ENDS_SENTENCE.test(value.trim()) ? `${value.trim()}.` : value;
          }
          if (fallbacks[field]) {
            repaired.push(`unfilled-merge-field: ${whole} had no value; "${fallbacks[field]}" was used`);
            return fallbacks[field]!;
          }
          if (field === 'firstName' && /^\s*(hi|hello|hey|dear|good (morning|afternoon))\b/i.test(sentence)) {
            repaired.push(`unfilled-merge-field: ${whole} had no value; greeted with "there"`);
            return 'there';
          }
          drop = true;
          if (field.startsWith('sender.') && line.trim() === whole) silent = true;
          return whole;
        });
        if (drop) {
          if (!silent)
            repaired.push(`unfilled-merge-field: a sentence needing a value the contact does not have was left out ("${sentence.trim()}")`);
          return [];
        }
        return [filled.replace(/ {2,}/g, ' ')];
      })
      .join(' '),
  );
  return { text: withoutDroppedLines(text.split('\n'), lines), repaired, unknown };
}

/**
 * The filled lines without those left empty by a dropped sentence, and without the blank line that
 * then doubles another (so a left-out paragraph or signature line leaves no gap).
 */
function withoutDroppedLines(template: string[], filled: string[]): string {
  const blank = (l: string | undefined) => l !== undefined && l.trim() === '';
  const out: string[] = [];
  let gap = false;
  filled.forEach((l, i) => {
    if (blank(l) && !blank(template[i])) {
      gap = true;
      return;
    }
    if (gap && blank(l) && (out.length === 0 || blank(out[out.length - 1]))) return;
    gap = gap && blank(l);
    out.push(l);
  });
  while (gap && blank(out[out.length - 1]) && !blank(template[template.length - 1])) out.pop();
  return out.join('\n');
}

/** Placeholders still present in a text (a model may copy one through). */
export const unfilledFields = (text: string): string[] => [...text.matchAll(FIELD)].map((m) => m[0]);
