// Understanding an inbound message: parseMail reads the MIME (mailparser), classify decides its
// intent in layers (reports, automatic mail, phrase rules, then the model when one is configured).
// Neither throws on what arrives from outside. The ingestion pipeline (src/inbound/) calls both.
export { parseMail, mailFromFields } from './parse.js';
export { classify, fromRules, MODEL_THRESHOLD, CONFIDENCE, INTENT_SCHEMA } from './classify.js';
export { stripReply } from './strip.js';
export { detectAutomatic } from './automatic.js';
export { findReturnDate } from './return-date.js';
export * as limits from './limits.js';
