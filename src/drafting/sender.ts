// Who signs a sequence's drafts: the `sender.*` merge fields, from the mailbox the sequence is
// pinned to (src/dispatch/senders.ts) and the list's owner, so the name under the email is the
// name on its From line. A sender with no name leaves the sentences and signature lines that
// need one out (src/drafting/merge.ts).
import type { Tx } from '../../db/database.js';
import { organizationOwner } from '../account/people.js';
import { DEPLOYMENT_MAILBOX, type PinnedMailbox } from '../dispatch/senders.js';
import { nameParts, type SenderValues } from './merge.js';

/** The person a list's drafts are written for: its owner while active, else the organization's owner. */
export interface ListOwner {
  name: string;
  email: string;
  title: string | null;
}

/**
 * The owner created with an organization has a generated name (`<organization> Owner`) at an
 * example.invalid address (src/account/organizations.ts): a placeholder, not a name to sign with,
 * until the operator names the person.
 */
const generated = (u: { name: string; email: string }, organizationName: string) =>
  /@example\.invalid$/i.test(u.email) && u.name === `${organizationName} Owner`;

/**
 * The people the lists' drafts are signed for, by list owner id (`''` for a list without one):
 * the owner while active, else the organization's owner; null where that is the owner as generated.
 */
export async function listOwners(
  trx: Tx,
  org: string,
  organizationName: string,
  ownerIds: Array<string | null>,
): Promise<Map<string, ListOwner | null>> {
  const ids = [...new Set(ownerIds.filter((id): id is string => id !== null))];
  const { id: orgOwnerId } = await organizationOwner(trx, org);
  const rows = await trx
    .selectFrom('users')
    .select(['id', 'name', 'email', 'title', 'status'])
    .where('organization_id', '=', org)
    .where('id', 'in', [...ids, orgOwnerId])
    .execute();
  const person = (id: string) => {
    const u = rows.find((r) => r.id === id && r.status === 'active');
    return u && !generated(u, organizationName) ? { name: u.name, email: u.email, title: u.title } : null;
  };
  const fallback = person(orgOwnerId);
  const out = new Map<string, ListOwner | null>([['', fallback]]);
  for (const id of ids) out.set(id, rows.some((r) => r.id === id && r.status === 'active') ? person(id) : fallback);
  return out;
}

const same = (a: string | null | undefined, b: string | null | undefined) =>
  !!a && !!b && a.trim().toLowerCase() === b.trim().toLowerCase();

/**
 * The sender's fields. The name is the pinned mailbox's display name (what the recipient sees on
 * the From line), else, for the deployment sender, a mailbox without a name or no mailbox yet,
 * the owner's. The title is the owner's only when the owner is that person (the name is theirs,
 * or the mailbox is their address), so one person's title never sits under another's name.
 */
export function senderValues(mailbox: PinnedMailbox | null, owner: ListOwner | null, organizationName: string): SenderValues {
  const boxName = mailbox && !mailbox.deployment ? mailbox.name?.trim() || null : null;
  const name = boxName ?? owner?.name.trim() ?? null;
  const ownerIsSender = !!owner && (boxName === null || same(boxName, owner.name) || same(mailbox?.email, owner.email));
  return {
    'sender.firstName': nameParts(name).first,
    'sender.name': name || null,
    'sender.title': ownerIsSender ? owner!.title?.trim() || null : null,
    'sender.company': organizationName.trim() || null,
  };
}

/** Who a reply to a contact is written as, and what the sender said to them: see replySender. */
export interface ReplySender {
  sender: SenderValues;
  /** The list's connection point and goal: the sender's own words, as for the sequence's drafts. */
  listContext: [string | null, string | null];
  /** The sender's product names (of the contact's latest sequence or list), besides the organization's. */
  products: string[];
}

/**
 * The sender of a reply to a contact: as for the sequence's drafts, the mailbox the contact's
 * latest sequence is pinned to and the owner of the contact's list sign it; the list's context
 * and the product are the sender's own words.
 */
export async function replySender(trx: Tx, org: string, organizationName: string, contactId: string): Promise<ReplySender> {
  const list = await trx
    .selectFrom('contacts as c')
    .innerJoin('contact_lists as l', (j) =>
      j.onRef('l.organization_id', '=', 'c.organization_id').onRef('l.id', '=', 'c.list_id').on('l.deleted_at', 'is', null),
    )
    .select(['l.connection_point', 'l.goal', 'l.user_id', 'l.product_id'])
    .where('c.organization_id', '=', org)
    .where('c.id', '=', contactId)
    .executeTakeFirst();
  const seq = await trx
    .selectFrom('contact_sequences')
    .select(['mailbox_id', 'product_id'])
    .where('organization_id', '=', org)
    .where('contact_id', '=', contactId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  const box =
    !seq?.mailbox_id || seq.mailbox_id === DEPLOYMENT_MAILBOX
      ? null
      : await trx
          .selectFrom('mailboxes')
          .select(['id', 'email', 'name'])
          .where('organization_id', '=', org)
          .where('id', '=', seq.mailbox_id)
          .executeTakeFirst();
  const mailbox: PinnedMailbox | null =
    seq?.mailbox_id === DEPLOYMENT_MAILBOX
      ? { id: DEPLOYMENT_MAILBOX, email: '', name: null, deployment: true }
      : box
        ? { ...box, deployment: false }
        : null;
  const ownerId = list?.user_id ?? null;
  const owner = (await listOwners(trx, org, organizationName, [ownerId])).get(ownerId ?? '') ?? null;
  const productId = seq?.product_id ?? list?.product_id ?? null;
  const products = productId
    ? (await trx.selectFrom('products').select('name').where('organization_id', '=', org).where('id', '=', productId).execute()).map(
        (p) => p.name,
      )
    : [];
  return {
    sender: senderValues(mailbox, owner, organizationName),
    listContext: [list?.connection_point ?? null, list?.goal ?? null],
    products,
  };
}
