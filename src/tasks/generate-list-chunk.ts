import type { Task } from 'graphile-worker';
import { runListChunk } from '../drafting/list-generation.js';
import type { Deps } from '../platform/services.js';
import { requireFields } from './context.js';

/** One chunk of a list generation run (src/drafting/list-generation.ts); a chunk already done is skipped. */
export function generateListChunk(deps: Deps): Task {
  return async (payload) => {
    const p = requireFields<{ organizationId: string; runId: string; chunk: number; contactIds: string[] }>(payload, [
      'organizationId',
      'runId',
    ]);
    if (!Number.isInteger(p.chunk) || !Array.isArray(p.contactIds) || !p.contactIds.every((c) => typeof c === 'string')) {
      throw new Error('generate_list_chunk: malformed payload');
    }
    await runListChunk(deps, p.organizationId, p.runId, p.chunk, p.contactIds);
  };
}
