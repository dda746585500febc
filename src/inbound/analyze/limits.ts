// How much of an inbound message the analysis reads. What arrives from outside can be large or
// hostile; every step works on a bounded amount so one message costs bounded time and memory.

/** Bytes of the raw message handed to the MIME parser; the rest is ignored (a longer message reads as truncated). */
export const MAX_PARSED_BYTES = 10 * 1024 * 1024;
/** Characters of an HTML part turned into text (when the message has no text part). */
export const MAX_HTML_CHARS = 512 * 1024;
/** Characters kept in `text` (and so at most in `strippedText`). */
export const MAX_TEXT_CHARS = 100_000;
/** Characters of a header value kept in `headers` (the RFC 5322 line limit). */
export const MAX_HEADER_CHARS = 998;
/** Message-IDs kept from References. */
export const MAX_REFERENCES = 100;
/** Addresses kept from To and Cc. */
export const MAX_RECIPIENTS = 100;
/**
 * Characters given to email-reply-parser after our own line pass, with lines wrapped at
 * REPLY_PARSER_LINE_CHARS: some of its patterns backtrack badly on long lines and long texts
 * (measured: a 4 KB line of "2020 from <a>" takes seconds), so it only ever sees a short, wrapped text.
 */
export const MAX_REPLY_PARSER_CHARS = 4096;
export const REPLY_PARSER_LINE_CHARS = 200;
/** Characters of the stripped text the phrase rules and the model read. */
export const MAX_RULES_CHARS = 4000;
/** Characters of an out-of-office text searched for the return date. */
export const MAX_DATE_TEXT_CHARS = 2000;
/** Bytes of a report part (delivery-status, feedback-report, returned headers) that are read. */
export const MAX_REPORT_PART_BYTES = 64 * 1024;
/** Recipients read from one delivery report. */
export const MAX_REPORT_RECIPIENTS = 50;
/** Characters of message text searched by the bounce heuristic. */
export const MAX_BOUNCE_TEXT_CHARS = 16_000;
