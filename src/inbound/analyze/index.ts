// Understanding an inbound message: parseMail reads the MIME (mailparser), classify decides its
// intent in layers (reports, automatic mail, phrase rules, then the model when one is configured).
// Neither throws on what arrives from outside. The ingestion pipeline (src/inbound/) calls both.

export { detectAutomatic } from './automatic.js';
export { CONFIDENCE, classify, fromRules, INTENT_SCHEMA, MODEL_THRESHOLD } from './classify.js';
export * as limits from './limits.js';
export { mailFromFields, parseMail } from './parse.js';
export { findReturnDate } from './return-date.js';
export { stripReply } from './strip.js';
