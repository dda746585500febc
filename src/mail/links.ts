// The links a sent message carries, served without an API key (the signed token is the proof):
//   GET  /unsubscribe/{token}  a small confirmation page with one button;
//   POST /unsubscribe/{token}  one-click unsubscribe (RFC 8058: mail clients POST
//                              `List-Unsubscribe=One-Click` here): an UNSUBSCRIBE suppression, the
//                              contact's sequences stopped, email.unsubscribed; idempotent; its
//                              body (unused) is read up to UNSUBSCRIBE_MAX_BODY_BYTES, 413 beyond;
//   GET  /t/o/{token}          the open pixel (only when the organization turned tracking on);
//   GET  /t/c/{token}          a click: recorded, then redirected to the signed target URL.
import type { Env, Hono } from 'hono';
import { sql } from 'kysely';
import type { Logger } from 'pino';
import { type Db, type Tx, withOrg } from '../../db/database.js';
import { suppressAddress } from '../compliance/suppression-add.js';
import { readBody } from '../http/body.js';
import { type EmitInput, emitMany } from '../platform/events.js';
import { pauseSequences } from '../sequences/lifecycle.js';
import type { Signer } from './tokens.js';

export interface LinkDeps {
  db: Db;
  signer: Signer;
  log: Logger;
}

/** A one-click body is `List-Unsubscribe=One-Click` (RFC 8058), the confirmation page's form posts nothing. */
export const UNSUBSCRIBE_MAX_BODY_BYTES = 64 * 1024;

const PIXEL = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');
export const page = (
  title: string,
  body: string,
) => `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>${title}</title><style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;line-height:1.5}button{font-size:1rem;padding:.5rem 1rem}</style></head>
<body>${body}</body></html>\n`;

/** The send record a token names, in its organization; null when the token or the record is not ours. */
async function sendOf(trx: Tx, org: string, recordId: string) {
  return trx
    .selectFrom('send_records')
    .select(['id', 'contact_id', 'draft_id', 'to_email', 'sequence_id', 'step', 'opened_at'])
    .where('organization_id', '=', org)
    .where('id', '=', recordId)
    .executeTakeFirst();
}

/** Unsubscribes the recipient of a send record; true when it changed anything. */
async function unsubscribe(trx: Tx, org: string, recordId: string): Promise<boolean> {
  const s = await sendOf(trx, org, recordId);
  if (!s || s.to_email === null) return false; // an erased recipient is suppressed for good already
  const events: EmitInput[] = [];
  // An expired entry of the address is renewed (suppressAddress), which counts as unsubscribing anew.
  const added = await suppressAddress(trx, org, { email: s.to_email, reason: 'UNSUBSCRIBE', source: 'one-click unsubscribe' });
  if (added) {
    events.push(added.event, {
      type: 'email.unsubscribed',
      resource: { type: 'Draft', id: s.draft_id ?? recordId },
      data: { contactId: s.contact_id, draftId: s.draft_id, sequenceId: s.sequence_id, step: s.step },
    });
  }
  const paused = s.contact_id ? await pauseSequences(trx, org, [s.contact_id], 'unsubscribed') : 0;
  await emitMany(trx, org, events);
  return added !== null || paused > 0;
}

export function mountMailLinks<E extends Env>(app: Hono<E>, deps: LinkDeps): void {
  const verified = (purpose: 'unsubscribe' | 'open' | 'click', token: string) => {
    const p = deps.signer.verify(purpose, token);
    return p && typeof p.o === 'string' && typeof p.r === 'string' ? p : null;
  };

  app.get('/unsubscribe/:token', (c) => {
    const token = c.req.param('token');
    if (!verified('unsubscribe', token))
      return c.html(page('Link not valid', '<h1>This link is not valid</h1><p>It may have been altered.</p>'), 404);
    return c.html(
      page(
        'Unsubscribe',
        `<h1>Unsubscribe</h1><p>You will receive no more emails of this outreach.</p>
<form method="post"><button type="submit">Unsubscribe</button></form>`,
      ),
    );
  });

  app.post('/unsubscribe/:token', async (c) => {
    const p = verified('unsubscribe', c.req.param('token'));
    if (!p) return c.html(page('Link not valid', '<h1>This link is not valid</h1>'), 404);
    if ((await readBody(c.req.raw, UNSUBSCRIBE_MAX_BODY_BYTES)) === null)
      return c.html(page('Request too large', '<h1>This request is too large</h1>'), 413);
    await withOrg(deps.db, p.o, (trx) => unsubscribe(trx, p.o, p.r));
    return c.html(page('Unsubscribed', '<h1>You are unsubscribed</h1><p>You will receive no more emails of this outreach.</p>'));
  });

  app.get('/t/o/:token', async (c) => {
    const p = verified('open', c.req.param('token'));
    if (p) {
      // The first open is recorded; opens are unreliable (machine opens), so later ones are not counted.
      await withOrg(deps.db, p.o, async (trx) => {
        const s = await trx
          .updateTable('send_records')
          .set({ opened_at: sql<Date>`now_ms()` })
          .where('organization_id', '=', p.o)
          .where('id', '=', p.r)
          .where('opened_at', 'is', null)
          .returning(['contact_id', 'draft_id', 'sequence_id', 'step'])
          .executeTakeFirst();
        if (!s) return;
        if (s.draft_id) {
          await trx
            .updateTable('drafts')
            .set({ opened_at: sql<Date>`now_ms()` })
            .where('organization_id', '=', p.o)
            .where('id', '=', s.draft_id)
            .where('opened_at', 'is', null)
            .execute();
        }
        await emitMany(trx, p.o, [
          {
            type: 'email.opened',
            resource: { type: 'Draft', id: s.draft_id ?? p.r },
            data: { contactId: s.contact_id, draftId: s.draft_id, sequenceId: s.sequence_id, step: s.step },
          },
        ]);
      }).catch((e) => deps.log.warn({ err: (e as Error).message }, 'open not recorded'));
    }
    return c.body(PIXEL, 200, { 'Content-Type': 'image/gif', 'Cache-Control': 'no-store, max-age=0' });
  });

  app.get('/t/c/:token', async (c) => {
    const p = verified('click', c.req.param('token'));
    let target: URL | null = null;
    try {
      target = p?.u ? new URL(p.u) : null;
    } catch {
      target = null;
    }
    if (!p || !target || !['http:', 'https:'].includes(target.protocol))
      return c.html(page('Link not valid', '<h1>This link is not valid</h1>'), 404);
    await withOrg(deps.db, p.o, async (trx) => {
      const s = await sendOf(trx, p.o, p.r);
      if (!s) return;
      await emitMany(trx, p.o, [
        {
          type: 'email.clicked',
          resource: { type: 'Draft', id: s.draft_id ?? p.r },
          data: { contactId: s.contact_id, draftId: s.draft_id, sequenceId: s.sequence_id, step: s.step, url: target!.toString() },
        },
      ]);
    }).catch((e) => deps.log.warn({ err: (e as Error).message }, 'click not recorded'));
    return c.redirect(target.toString(), 302);
  });
}
