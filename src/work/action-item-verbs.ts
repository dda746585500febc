// The verbs on an action item (complete, reopen, dismiss, snooze) with their ownership rule: its
// owner, or a MANAGER, ADMIN or OWNER, may act on it. Completing or dismissing emits
// action.resolved once.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { invalid, notFound, ProblemError } from '../http/problems.js';
import type { Clock } from '../platform/clock.js';
import { emit } from '../platform/events.js';
import { readActionItem } from './action-item-reads.js';

type Verb = 'complete' | 'reopen' | 'dismiss' | 'snooze';
export interface VerbBody {
  reason?: string;
  until?: string;
  days?: number;
}

/** Roles that may act on anyone's item; anyone else only on their own. */
const MANAGER_ROLES = ['MANAGER', 'ADMIN', 'OWNER'];
/** The body fields each verb uses; any other is refused. */
const FIELDS: Record<Verb, readonly string[]> = { complete: [], reopen: [], dismiss: ['reason'], snooze: ['reason', 'until', 'days'] };
const isVerb = (v: string): v is Verb => Object.hasOwn(FIELDS, v);
const DEFAULT_SNOOZE_DAYS = 1;

/**
 * Only the fields of the state a verb puts the item in stay set (see the operation's table). A
 * snooze starts at the clock's now and, for `days`, ends that long after it (the sweep compares
 * the end with the same clock).
 */
function changesFor(verb: Verb, body: VerbBody, clock: Clock) {
  const cleared = {
    completed_at: null,
    dismissed_at: null,
    dismiss_reason: null,
    snoozed_until_at: null,
    snoozed_at: null,
    snooze_reason: null,
  };
  const now = sql<Date>`now_ms()`;
  switch (verb) {
    case 'complete':
      return { ...cleared, status: 'completed', completed_at: now };
    case 'dismiss':
      return { ...cleared, status: 'dismissed', dismissed_at: now, dismiss_reason: body.reason ?? null };
    case 'reopen':
      return { ...cleared, status: 'pending' };
    case 'snooze': {
      const at = clock.now();
      return {
        ...cleared,
        status: 'pending',
        snoozed_at: sql<Date>`${at}::timestamptz`,
        snooze_reason: body.reason ?? null,
        snoozed_until_at:
          body.until !== undefined
            ? sql<Date>`${body.until}::timestamptz`
            : sql<Date>`${at}::timestamptz + ${body.days ?? DEFAULT_SNOOZE_DAYS} * interval '1 day'`,
      };
    }
  }
}

/** Applies `verb` to the item for the key's user (`actor`); a repeated complete or dismiss changes nothing. */
export async function applyVerb(
  trx: Tx,
  org: string,
  actor: { userId: string | null; userRole: string | null },
  id: string,
  verb: string,
  body: VerbBody | undefined,
  clock: Clock,
) {
  if (!isVerb(verb)) throw invalid(`Unknown verb "${verb}": use complete, reopen, dismiss or snooze.`, 'path.verb');
  const b = body ?? {};
  for (const field of Object.keys(b)) {
    if (!FIELDS[verb].includes(field)) {
      throw invalid(
        `${field} does not apply to ${verb}${FIELDS[verb].length ? ` (it takes ${FIELDS[verb].join(', ')})` : ' (it takes no fields)'}.`,
        `body.${field}`,
      );
    }
  }
  if (b.until !== undefined && !(Date.parse(b.until) > clock.now().getTime())) throw invalid('until must be in the future.', 'body.until');

  // Locked, so concurrent verbs on one item apply one after the other (one action.resolved at most).
  const item = await trx
    .selectFrom('action_items')
    .select(['id', 'status', 'action_type', 'entity_type', 'entity_id', 'sales_person_id'])
    .where('organization_id', '=', org)
    .where('id', '=', id)
    .forUpdate()
    .executeTakeFirst();
  if (!item) throw notFound('action item');
  const own = actor.userId !== null && item.sales_person_id === actor.userId;
  const manager = actor.userId !== null && MANAGER_ROLES.includes(actor.userRole ?? '');
  if (!own && !manager) {
    throw new ProblemError(
      'role-required',
      actor.userId === null
        ? "This API key is attributed to no sales person, so it owns no action item; use a key attributed to the item's owner or to a MANAGER, ADMIN or OWNER."
        : 'The action item belongs to another sales person; only its owner or a MANAGER, ADMIN or OWNER may act on it.',
    );
  }

  const repeat = (verb === 'complete' && item.status === 'completed') || (verb === 'dismiss' && item.status === 'dismissed');
  if (!repeat) {
    await trx
      .updateTable('action_items')
      .set({ ...changesFor(verb, b, clock), updated_at: sql<Date>`now_ms()` })
      .where('organization_id', '=', org)
      .where('id', '=', item.id)
      .execute();
    if (verb === 'complete' || verb === 'dismiss') {
      await emit(trx, org, {
        type: 'action.resolved',
        resource: { type: 'ActionItem', id: item.id },
        data: {
          actionItemId: item.id,
          actionType: item.action_type,
          status: verb === 'complete' ? 'completed' : 'dismissed',
          entityType: item.entity_type,
          entityId: item.entity_id,
          salesPersonId: item.sales_person_id,
          resolvedByUserId: actor.userId,
        },
      });
    }
  }
  return { actionId: item.id, status: verb, item: await readActionItem(trx, org, item.id) };
}
