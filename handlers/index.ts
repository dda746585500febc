// Every public operation's handler, keyed by operationId; one module per tag. Handlers is
// complete: an operation of the document without a handler here does not compile.
import type { Handlers } from '../src/http/handler.js';
import { actionItemHandlers } from './action-items.js';
import { actionHandlers } from './actions.js';
import { analyticsHandlers } from './analytics.js';
import { companyHandlers } from './companies.js';
import { contactHandlers } from './contacts.js';
import { dealHandlers } from './deals.js';
import { draftHandlers } from './drafts.js';
import { eventHandlers } from './events.js';
import { leadHandlers } from './leads.js';
import { listHandlers } from './lists.js';
import { meHandlers } from './me.js';
import { messageHandlers } from './messages.js';
import { publicTemplateHandlers } from './public-templates.js';
import { sequenceHandlers } from './sequences.js';
import { suppressionHandlers } from './suppression.js';
import { usageHandlers } from './usage.js';
import { webhookHandlers } from './webhooks.js';

export const handlers: Handlers = {
  ...meHandlers,
  ...publicTemplateHandlers,
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
