// The draft_reply action of POST /actions: a reply to the contact's latest message, drafted for
// review. It is `x-long-running`: the model is asked between two short transactions.
import { type Tx, withOrg } from '../../db/database.js';
import { draftsRemaining, takeDrafts } from '../account/usage.js';
import { storedEvidence } from '../drafting/context.js';
import { storedContactResearch } from '../drafting/generate.js';
import { linkPolicy, senderDomains } from '../drafting/links.js';
import { replyContext, writeReply } from '../drafting/reply.js';
import { replySender } from '../drafting/sender.js';
import type { AuthInfo } from '../http/handler.js';
import { type EmitInput, emitMany } from '../platform/events.js';
import { newId } from '../platform/ids.js';
import type { Deps } from '../platform/services.js';
import {
  type ActionBody,
  advise,
  type Contact,
  degradedBecause,
  executed,
  lockContact,
  noop,
  type Outcome,
  type Run,
} from './action-run.js';

/** The contact's latest inbound message from a person (automatic mail, such as an out-of-office or a delivery report, is not answered). */
const latestInbound = (trx: Tx, org: string, contactId: string) =>
  trx
    .selectFrom('messages')
    .select(['id', 'message_id', 'subject', 'stripped_text', 'body', 'intent', 'created_at'])
    .where('organization_id', '=', org)
    .where('contact_id', '=', contactId)
    .where('direction', '=', 'INBOUND')
    .where('automatic', '=', false)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();

const QUOTA_USED = 'the drafts allowance of the period is used up';

/**
 * draft_reply: what the reply needs is read in one transaction, the reply is written outside any
 * (the model may take its time), and the draft, its quota use and its events commit in a second.
 */
export async function draftReply(deps: Deps, auth: AuthInfo, body: ActionBody): Promise<Outcome> {
  const { db, config } = deps;
  const org = auth.organizationId;
  const run = (trx: Tx, contact: Contact): Run => ({ trx, org, auth, body, contact, config, clock: deps.services.clock });
  const read = await withOrg(db, org, async (trx) => {
    const contact = await lockContact(trx, org, body.contactId);
    const message = await latestInbound(trx, org, contact.id);
    if (!message) return { done: noop('The contact has sent no message (other than automatic mail) to reply to.') };
    const why =
      (await degradedBecause(trx, org, 'draft_reply')) ?? ((await draftsRemaining(trx, org, deps.services.clock)) < 1 ? QUOTA_USED : null);
    if (why) return { done: await advise(run(trx, contact), why) };
    const company =
      contact.company_id === null
        ? null
        : await trx
            .selectFrom('companies')
            .select(['name', 'domain_normalized'])
            .where('organization_id', '=', org)
            .where('id', '=', contact.company_id)
            .executeTakeFirst();
    const links = linkPolicy(await senderDomains(trx, org), config.researchSiteUrlTemplate, company?.domain_normalized ?? null);
    const sender = await replySender(trx, org, auth.org.name, contact.id);
    return { contact, message, company: company ? (company.name ?? company.domain_normalized) : null, links, sender };
  });
  if ('done' in read) return read.done!;
  const { contact, message } = read;
  const rc = replyContext({
    contact: { name: contact.name, title: contact.title, company: read.company },
    senderName: auth.org.name,
    sender: read.sender,
    message: {
      id: message.id,
      messageId: message.message_id,
      subject: message.subject,
      text: message.stripped_text ?? message.body,
      intent: message.intent,
      receivedAt: message.created_at,
    },
    research: storedContactResearch(contact.research),
    links: read.links,
  });
  const w = await writeReply(rc, deps.services.model, deps.log);

  return withOrg(db, org, async (trx) => {
    const c = await lockContact(trx, org, body.contactId);
    const taken = await takeDrafts(
      trx,
      org,
      { created: 1, regenerated: 0, llmTokens: w.tokens, llmCostMillicents: w.costMillicents },
      deps.services.clock,
    );
    if (taken.created < 1) return advise(run(trx, c), QUOTA_USED);
    const draftId = newId('drf');
    const flagged = w.flags.length > 0;
    await trx
      .insertInto('drafts')
      .values({
        organization_id: org,
        id: draftId,
        contact_id: c.id,
        sequence_id: null,
        step: 1,
        status: 'DRAFT_GENERATED',
        version: 1,
        subject: w.subject,
        body: w.body,
        provider: w.provider,
        flagged,
        llm_tokens: w.tokens,
        evidence: storedEvidence(rc.research, w.citations, { inReplyTo: { messageId: message.id } }),
        guardrail: JSON.stringify({
          clean: !flagged && w.advisories.length === 0,
          attempts: w.attempts,
          repaired: w.repaired,
          advisories: w.advisories,
          flags: w.flags,
        }),
      })
      .execute();
    const data = { draftId, contactId: c.id, sequenceId: null, step: 1, version: 1, provider: w.provider, inReplyToMessageId: message.id };
    const events: EmitInput[] = [{ type: 'draft.created', resource: { type: 'Draft', id: draftId }, data: { ...data, flagged } }];
    if (flagged) events.push({ type: 'grounding.would_fire', resource: { type: 'Draft', id: draftId }, data: { ...data, flags: w.flags } });
    await emitMany(trx, org, events);
    return executed(
      `Drafted a reply to message ${message.id} for review (${w.provider}); it is not part of a sequence and is never sent by itself.`,
      { draftId, messageId: message.id, provider: w.provider, flagged },
    );
  });
}
