// The operator API: every operation's handler, keyed by operationId; one module per concern
// (AdminHandlers is complete: an operation without a handler here does not compile).
// Operator work spans organizations, so it runs with row-level security in system mode; the
// organization is always named in the path.
import type { AdminHandlers } from '../../src/http/handler.js';
import { adminActionItemHandlers } from './action-items.js';
import { apiKeyHandlers } from './api-keys.js';
import { catalogHandlers } from './catalog.js';
import { adminContactHandlers } from './contacts.js';
import { csvImportHandlers } from './csv-import.js';
import { inboundMessageHandlers } from './inbound-messages.js';
import { leadAdminHandlers } from './leads.js';
import { adminListHandlers } from './lists.js';
import { organizationHandlers } from './organizations.js';
import { queueHandlers } from './queue.js';
import { ruleHandlers } from './rules.js';
import { sendingHandlers } from './sending.js';
import { adminSuppressionHandlers } from './suppression.js';
import { teamHandlers } from './team.js';

export const adminHandlers: AdminHandlers = {
  ...organizationHandlers,
  ...apiKeyHandlers,
  ...catalogHandlers,
  ...adminListHandlers,
  ...adminSuppressionHandlers,
  ...queueHandlers,
  ...sendingHandlers,
  ...leadAdminHandlers,
  ...inboundMessageHandlers,
  ...adminActionItemHandlers,
  ...ruleHandlers,
  ...teamHandlers,
  ...adminContactHandlers,
  ...csvImportHandlers,
};
