// Plain-text helpers shared by research (reading pages) and drafting (reading drafts).

/** Whitespace runs as one space, trimmed. */
export const collapse = (s: string): string => s.replace(/\s+/g, ' ').trim();

const segmenter = new Intl.Segmenter('en', { granularity: 'sentence' });

/** The sentences of a text block (Intl's sentence segmentation), each verbatim and trimmed. */
export function sentences(block: string): string[] {
  return [...segmenter.segment(block)].map((s) => s.segment.trim()).filter((s) => s.length > 0);
}
