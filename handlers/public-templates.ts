// Public templates (no API key): the active ones, read by src/sequences/templates.ts.
import type { Handlers, PublicHandler } from '../src/http/handler.js';
import { listPublicTemplates as readPublicTemplates } from '../src/sequences/templates.js';

/** Public templates belong to no organization; anyone may read the active ones. */
const listPublicTemplates: PublicHandler<'listPublicTemplates'> = async ({ db, query }) => {
  return { status: 200, body: await readPublicTemplates(db, query) };
};

export const publicTemplateHandlers = { listPublicTemplates } satisfies Partial<Handlers>;
