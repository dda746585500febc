// The messages of the claimed steps, as they will go: from the chosen mailbox (DKIM-signed when it
// has a key), threaded under the sequence's earlier steps, with the reply address, the unsubscribe
// link and, when the organization tracks, the open pixel and click links, all signed for the new
// send record.
import type { Tx } from '../../db/database.js';
import { composeMessage, mintMessageId } from '../mail/message.js';
import { replyAddress } from '../mail/tokens.js';
import { newId } from '../platform/ids.js';
import type { Deps } from '../platform/services.js';
import type { Claim, Mailbox, Row } from './batch.js';
import type { SendingSettings } from './settings.js';

/** Each passing step with its mailbox, its new send record's id and its message. */
export async function composeClaims(
  deps: Deps,
  trx: Tx,
  org: string,
  rows: Row[],
  chosen: Map<string, Mailbox>,
  settings: SendingSettings,
): Promise<Claim[]> {
  const later = rows.filter((r) => r.step > 1);
  const earlier =
    later.length === 0
      ? []
      : await trx
          .selectFrom('send_records')
          .select(['sequence_id', 'message_id', 'subject', 'step'])
          .where('organization_id', '=', org)
          .where(
            'sequence_id',
            'in',
            later.map((r) => r.sequence_id),
          )
          .where('status', 'in', ['sent', 'possibly_sent'])
          .orderBy('step')
          .execute();
  const base = deps.config.publicBaseUrl;
  const { signer, secretBox } = deps.services;
  const claims: Claim[] = [];
  for (const r of rows) {
    const mailbox = chosen.get(r.id)!;
    const thread = earlier.filter((e) => e.sequence_id === r.sequence_id);
    const recordId = newId('snd');
    const replyTo = deps.config.inboundReplyDomain ? replyAddress(signer, deps.config.inboundReplyDomain, org, recordId) : null;
    const dkimKey = mailbox.dkim ? secretBox.open(mailbox.dkim.keySealed) : null;
    const message = composeMessage({
      from: { name: mailbox.name, address: mailbox.email },
      to: { name: r.name || null, address: r.email },
      // A later step keeps the first step's subject, as a reply to it.
      subject: thread.find((e) => e.step === 1)?.subject?.replace(/^re:\s*/i, '') ?? r.subject,
      body: r.body,
      messageId: mintMessageId(mailbox.email),
      thread: thread.map((e) => e.message_id!).filter(Boolean),
      unsubscribeUrl: `${base}/unsubscribe/${signer.sign('unsubscribe', { o: org, r: recordId })}`,
      dkim:
        mailbox.dkim && dkimKey
          ? { domainName: mailbox.dkim.domainName, keySelector: mailbox.dkim.keySelector, privateKey: dkimKey }
          : null,
      tracking: settings.tracking
        ? {
            pixel: `${base}/t/o/${signer.sign('open', { o: org, r: recordId })}`,
            click: (url) => `${base}/t/c/${signer.sign('click', { o: org, r: recordId, u: url })}`,
          }
        : null,
      replyTo,
    });
    claims.push({
      recordId,
      queueId: r.id,
      sequenceId: r.sequence_id,
      step: r.step,
      stepCount: r.stepCount,
      contactId: r.contact_id,
      draftId: r.draftId,
      mailbox,
      message,
    });
  }
  return claims;
}
