// The deployment's email kill switch (platform_settings), as the operator reads and sets it. While
// it is on, the dispatcher defers every step (a gate of the send job); turning it off releases the
// steps it held in every organization at once (src/dispatch/reevaluate.ts), in the same
// transaction, which is why it is set on the cross-organization role's connection.
import { sql } from 'kysely';
import { type Db, withSystem } from '../../db/database.js';
import { reevaluateHeld } from './reevaluate.js';

export async function killSwitch(db: Db): Promise<{ emailKillSwitch: boolean }> {
  const r = await db.selectFrom('platform_settings').select('email_kill_switch').executeTakeFirstOrThrow();
  return { emailKillSwitch: r.email_kill_switch };
}

/** Sets the switch on `systemDb` (outbound_system); off, every organization's steps it held are gated again now. */
export async function setKillSwitch(systemDb: Db, on: boolean): Promise<{ emailKillSwitch: boolean }> {
  return withSystem(systemDb, async (trx) => {
    const r = await trx
      .updateTable('platform_settings')
      .set({ email_kill_switch: on, updated_at: sql<Date>`now_ms()` })
      .returning('email_kill_switch')
      .executeTakeFirstOrThrow();
    if (!on) await reevaluateHeld(trx, { codes: ['kill_switch'] });
    return { emailKillSwitch: r.email_kill_switch };
  });
}
