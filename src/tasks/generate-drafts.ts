import type { Task } from 'graphile-worker';
import { type GenerationMode, generateDrafts } from '../drafting/generate.js';
import type { Deps } from '../platform/services.js';
import { requireFields } from './context.js';

const MODES: GenerationMode[] = ['missing', 'unapproved', 'unsent'];

/**
 * Writes the drafts of a batch of sequences (src/drafting/generate.ts). Idempotent per pass: a
 * job run again after a crash writes only what the first run did not commit.
 */
export function generateDraftsTask(deps: Deps): Task {
  return async (payload) => {
    const p = requireFields<{ organizationId: string; pass: string; mode: GenerationMode; sequenceIds: string[]; runId: string | null }>(
      payload,
      ['organizationId', 'pass', 'mode'],
    );
    if (!Array.isArray(p.sequenceIds) || !p.sequenceIds.every((s) => typeof s === 'string') || !MODES.includes(p.mode)) {
      throw new Error('generate_drafts: malformed payload');
    }
    await generateDrafts(deps, p.organizationId, { sequenceIds: p.sequenceIds, pass: p.pass, mode: p.mode, runId: p.runId ?? null });
  };
}
