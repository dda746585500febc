// Every public operation's handler, keyed by operationId; one module per tag. Operations without
// a handler answer 501 not-implemented.
import type { Handlers } from '../src/http/handler.js';
import { meHandlers } from './me.js';
import { publicTemplateHandlers } from './public-templates.js';
import { contactHandlers } from './contacts.js';
import { companyHandlers } from './companies.js';
import { listHandlers } from './lists.js';
import { suppressionHandlers } from './suppression.js';
import { webhookHandlers } from './webhooks.js';
import { eventHandlers } from './events.js';
import { dealHandlers } from './deals.js';
import { sequenceHandlers } from './sequences.js';
import { draftHandlers } from './drafts.js';
import { usageHandlers } from './usage.js';
import { leadHandlers } from './leads.js';
import { messageHandlers } from './messages.js';
import { actionItemHandlers } from './action-items.js';
import { actionHandlers } from './actions.js';
import { analyticsHandlers } from './analytics.js';

export const handlers: Handlers = {
  ...meHandlers,
  ...(publicTemplateHandlers as unknown as Handlers),
  ...contactHandlers,
  ...companyHandlers,
  ...listHandlers,
  ...suppressionHandlers,
  ...webhookHandlers,
  ...eventHandlers,
  ...dealHandlers,
  ...sequenceHandlers,
  ...draftHandlers,
  ...usageHandlers,
  ...leadHandlers,
  ...messageHandlers,
  ...actionItemHandlers,
  ...actionHandlers,
  ...analyticsHandlers,
};
