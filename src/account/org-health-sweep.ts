// Periodic organization-health sweep (crontab, every 5 minutes): recomputes every organization's
// health, a batch of organizations per transaction and one set-based read per batch
// (src/account/org-health.ts), so what changes with time alone is caught: the 28-day bounce and complaint
// windows slide, the research budget resets with the usage period. A change emits org.health_changed.
import { withSystem } from '../../db/database.js';
import { emitMany } from '../platform/events.js';
import type { SystemDeps } from '../platform/services.js';
import { refreshOrgHealth } from './org-health.js';

const BATCH = 200;

/** Sweeps every organization; returns how many it checked and how many changed. */
export async function runOrgHealthSweep(deps: SystemDeps): Promise<{ checked: number; changed: number }> {
  const out = { checked: 0, changed: 0 };
  let after = '';
  for (;;) {
    const n = await withSystem(deps.systemDb, async (trx) => {
      const ids = (await trx.selectFrom('organizations').select('id').where('id', '>', after).orderBy('id').limit(BATCH).execute()).map(
        (o) => o.id,
      );
      const changes = await refreshOrgHealth(trx, ids, deps.services.clock);
      for (const [org, event] of changes) await emitMany(trx, org, [event]);
      out.changed += changes.size;
      if (ids.length) after = ids[ids.length - 1];
      return ids.length;
    });
    out.checked += n;
    if (n < BATCH) return out;
  }
}
