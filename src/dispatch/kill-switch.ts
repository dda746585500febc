// The deployment's email kill switch (platform_settings), as the operator reads and sets it. While
// it is on, the dispatcher defers every step (a gate of the send job).
import { sql } from 'kysely';
import type { Db } from '../../db/database.js';

export async function killSwitch(db: Db): Promise<{ emailKillSwitch: boolean }> {
  const r = await db.selectFrom('platform_settings').select('email_kill_switch').executeTakeFirstOrThrow();
  return { emailKillSwitch: r.email_kill_switch };
}

export async function setKillSwitch(db: Db, on: boolean): Promise<{ emailKillSwitch: boolean }> {
  const r = await db
    .updateTable('platform_settings')
    .set({ email_kill_switch: on, updated_at: sql<Date>`now_ms()` })
    .returning('email_kill_switch')
    .executeTakeFirstOrThrow();
  return { emailKillSwitch: r.email_kill_switch };
}
