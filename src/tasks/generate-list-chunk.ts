import type { Task } from 'graphile-worker';
import { failListRun, runListChunk } from '../drafting/list-generation.js';
import type { Deps } from '../platform/services.js';
import { requireFields } from './context.js';

/**
 * One chunk of a list generation run (src/drafting/list-generation.ts); a chunk already done is
 * skipped, and a chunk whose last attempt fails fails its run.
 */
export function generateListChunk(deps: Deps): Task {
  return async (payload, helpers) => {
    const p = requireFields<{ organizationId: string; runId: string; chunk: number; contactIds: string[] }>(payload, [
      'organizationId',
      'runId',
    ]);
    if (!Number.isInteger(p.chunk) || !Array.isArray(p.contactIds) || !p.contactIds.every((c) => typeof c === 'string')) {
      throw new Error('generate_list_chunk: malformed payload');
    }
    try {
      await runListChunk(deps, p.organizationId, p.runId, p.chunk, p.contactIds);
    } catch (err) {
      // The last attempt failed: the run is failed, so that it does not hold its list for ever.
      if (helpers.job.attempts >= helpers.job.max_attempts) await failListRun(deps, p.organizationId, p.runId);
      throw err;
    }
  };
}
