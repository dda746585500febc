// Plain-text helpers shared by research (reading pages), drafting (reading drafts) and the lists
// that show a preview of a text (drafts, messages).
import { type RawBuilder, sql } from 'kysely';

/** Whitespace runs as one space, trimmed. */
export const collapse = (s: string): string => s.replace(/\s+/g, ' ').trim();

const segmenter = new Intl.Segmenter('en', { granularity: 'sentence' });

/** The sentences of a text block (Intl's sentence segmentation), each verbatim and trimmed. */
export function sentences(block: string): string[] {
  return [...segmenter.segment(block)].map((s) => s.segment.trim()).filter((s) => s.length > 0);
}

/** Characters of a list item's preview: "about 200" (spec section 8). */
export const PREVIEW_CHARS = 200;

/**
 * A preview of a text column or expression, computed in the database so a long text never leaves
 * it: the text itself when short, else its first PREVIEW_CHARS characters cut back to the last
 * whole word (when there is one) and an ellipsis.
 */
export function previewSql(text: RawBuilder<string>): RawBuilder<string> {
  const n = sql.lit(PREVIEW_CHARS);
  return sql<string>`CASE WHEN length(${text}) <= ${n} THEN ${text}
      ELSE coalesce(substring(left(${text}, ${n}) from '^(.*\\S)\\s'), left(${text}, ${n})) || '…' END`;
}
