// The built-in templates, for lists created without a template of their own (and usable as a
// templateId): a first touch, a follow-up and a break-up, written to read well as they stand.
// Each step is sendable without a model: the fallback writer adds one cited line from the
// contact's research after the greeting (src/drafting/fallback.ts), and a value a contact or
// sender lacks leaves its sentence or signature line out (src/drafting/merge.ts), so every
// variant is still whole sentences. A model keeps their intent and call to action.
import type { TemplateStep } from '../drafting/context.js';

/** The built-in sequence: first touch (day 0), follow-up (day 3), break-up (day 7). */
export const BUILTIN_SEQUENCE_ID = 'builtin-sequence';
/** The built-in sequence's first step alone. */
export const BUILTIN_FIRST_TOUCH_ID = 'builtin-first-touch';

const SUBJECT = 'A quick idea for {{company}}';

const FIRST_TOUCH: TemplateStep = {
  step: 1,
  dayOffset: 0,
  subject: SUBJECT,
  body: [
    'Hi {{firstName}},',
    '',
    '{{connectionPoint}}',
    '',
    "I'm {{sender.firstName}} from {{sender.company}}. I'd like to learn what {{company}} is focused on this quarter and share how teams like yours work with us.",
    '',
    'Would you be open to a 15-minute call next week?',
    '',
    'Best regards,',
    '{{sender.name}}',
    '{{sender.title}}',
    '{{sender.company}}',
  ].join('\n'),
};

const FOLLOW_UP: TemplateStep = {
  step: 2,
  dayOffset: 3,
  subject: SUBJECT,
  body: [
    'Hi {{firstName}},',
    '',
    "I'm following up on my note from a few days ago in case it got buried.",
    '',
    'If a call is too much right now, I can send a short overview you can read in two minutes. Would that be useful?',
    '',
    'Best,',
    '{{sender.firstName}}',
    '{{sender.company}}',
  ].join('\n'),
};

const BREAK_UP: TemplateStep = {
  step: 3,
  dayOffset: 7,
  subject: SUBJECT,
  body: [
    'Hi {{firstName}},',
    '',
    "I haven't heard back, so I'll assume the timing isn't right and won't keep writing.",
    '',
    "If that changes, just reply to this email and I'll pick it up from there. And if someone else at {{company}} is the better person to talk to, I'd be grateful for a name.",
    '',
    'All the best,',
    '{{sender.firstName}}',
    '{{sender.company}}',
  ].join('\n'),
};

/** The built-in templates by id, their steps numbered from 1. */
export const BUILTIN_TEMPLATES: Readonly<Record<string, TemplateStep[]>> = {
  [BUILTIN_SEQUENCE_ID]: [FIRST_TOUCH, FOLLOW_UP, BREAK_UP],
  [BUILTIN_FIRST_TOUCH_ID]: [FIRST_TOUCH],
};
