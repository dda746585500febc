// The part of html-to-text (10.x, which ships no types) that the mail analysis uses.
declare module 'html-to-text' {
  export interface HtmlToTextOptions {
    wordwrap?: number | false | null;
    preserveNewlines?: boolean;
    baseElements?: { selectors?: string[]; returnDomByDefault?: boolean };
    limits?: { ellipsis?: string; maxBaseElements?: number; maxChildNodes?: number; maxDepth?: number; maxInputLength?: number };
    selectors?: Array<{ selector: string; format?: string; options?: Record<string, unknown> }>;
  }
  export function compile(options?: HtmlToTextOptions): (html: string) => string;
  export function convert(html: string, options?: HtmlToTextOptions): string;
}
