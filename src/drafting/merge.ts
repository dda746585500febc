// Merge fields of template text: `{{firstName}}`, `{{company}}`... (case-insensitive, spaces
// inside the braces allowed, snake_case accepted). A field whose value is unknown for this contact
// is repaired: in a subject by a neutral word, in a body by "there" for a first name in a
// greeting, otherwise by leaving out the sentence holding it; an unknown field name is removed
// and reported.

export interface MergeValues {
  firstName: string | null;
  lastName: string | null;
  name: string | null;
  company: string | null;
  title: string | null;
  listName: string | null;
  connectionPoint: string | null;
  goal: string | null;
}

const ALIASES: Record<string, keyof MergeValues> = {
  firstname: 'firstName',
  first_name: 'firstName',
  lastname: 'lastName',
  last_name: 'lastName',
  name: 'name',
  fullname: 'name',
  full_name: 'name',
  company: 'company',
  companyname: 'company',
  company_name: 'company',
  title: 'title',
  jobtitle: 'title',
  job_title: 'title',
  listname: 'listName',
  list_name: 'listName',
  connectionpoint: 'connectionPoint',
  connection_point: 'connectionPoint',
  goal: 'goal',
};

const FIELD = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

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
        const filled = sentence.replace(FIELD, (whole, raw: string) => {
          const field = ALIASES[raw.toLowerCase()];
          if (!field) {
            unknown.push(whole);
            return '';
          }
          const value = values[field];
          if (value) return value;
          if (fallbacks[field]) {
            repaired.push(`unfilled-merge-field: ${whole} had no value; "${fallbacks[field]}" was used`);
            return fallbacks[field]!;
          }
          if (field === 'firstName' && /^\s*(hi|hello|hey|dear|good (morning|afternoon))\b/i.test(sentence)) {
            repaired.push(`unfilled-merge-field: ${whole} had no value; greeted with "there"`);
            return 'there';
          }
          drop = true;
          return whole;
        });
        if (drop) {
          repaired.push(`unfilled-merge-field: a sentence needing a value the contact does not have was left out ("${sentence.trim()}")`);
          return [];
        }
        return [filled.replace(/ {2,}/g, ' ')];
      })
      .join(' '),
  );
  return { text: lines.join('\n'), repaired, unknown };
}

/** Placeholders still present in a text (a model may copy one through). */
export const unfilledFields = (text: string): string[] => [...text.matchAll(FIELD)].map((m) => m[0]);
