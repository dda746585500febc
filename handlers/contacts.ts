// Contacts: idempotent creation per person, filtered keyset listing, soft delete, GDPR erasure and
// pausing of a contact's sequences. The work is in src/crm/ (contact-*.ts) and src/compliance/.
import { eraseContactRecords } from '../src/compliance/contact-erasure.js';
import { softDeleteContact } from '../src/crm/contact-deletion.js';
import { fileContact } from '../src/crm/contact-filing.js';
import { researchLiveContact } from '../src/crm/contact-research-run.js';
import { contactPage } from '../src/crm/contact-search.js';
import { pauseContactSequences } from '../src/crm/contact-sequences.js';
import { changeContact } from '../src/crm/contact-update.js';
import { contactById, contactDetail, contactResearch } from '../src/crm/contact-view.js';
import type { Handler, Handlers, LongHandler } from '../src/http/handler.js';

const listContacts: Handler<'listContacts'> = async ({ trx, auth, query }) => ({
  status: 200,
  body: await contactPage(trx, auth.organizationId, query),
});

const createContact: Handler<'createContact'> = async ({ trx, auth, body }) => {
  const org = auth.organizationId;
  const filed = await fileContact(trx, org, {
    email: body.email,
    name: body.name,
    title: body.title,
    company: body.company,
    listId: body.listId,
    qualificationStatus: body.qualificationStatus,
    fitScore: body.fitScore,
    urgencyScore: body.urgencyScore,
    userId: auth.userId,
  });
  const contact = await contactById(trx, org, filed.id);
  if (filed.outcome === 'created') return { status: 201, body: contact };
  return filed.outcome === 'live'
    ? { status: 200, body: contact, headers: { 'X-Service-Existing-List': 'true' } }
    : { status: 200, body: contact };
};

const getContact: Handler<'getContact'> = async ({ trx, auth, params, query, services }) => {
  const include = new Set((query.include ?? '').split(',').map((s) => s.trim().toLowerCase()));
  return { status: 200, body: await contactDetail(trx, auth.organizationId, params.id, include.has('research'), services.clock) };
};

const getContactResearch: Handler<'getContactResearch'> = async ({ trx, auth, params, services }) => ({
  status: 200,
  body: await contactResearch(trx, auth.organizationId, params.id, services.clock),
});

/** Researches the contact (synchronous; see src/research/): 404 unknown, 400 no company domain, then the run. */
const researchContact: LongHandler<'researchContact'> = async ({ config, db, log, services, auth, params }) => ({
  status: 200,
  body: await researchLiveContact({ config, db, log, services }, auth.organizationId, params.id),
});

const updateContact: Handler<'updateContact'> = async ({ trx, auth, params, body }) => ({
  status: 200,
  body: await changeContact(trx, auth.organizationId, params.id, body),
});

const deleteContact: Handler<'deleteContact'> = async ({ trx, auth, params }) => ({
  status: 200,
  body: await softDeleteContact(trx, auth.organizationId, params.id),
});

const eraseContact: Handler<'eraseContact'> = async ({ trx, auth, params, body, config, services }) => ({
  status: 200,
  body: await eraseContactRecords(
    trx,
    { auth, requesterRef: body.requesterRef, reason: body.reason, erasureHashSecret: config.erasureHashSecret, services },
    params.id,
  ),
});

const pauseContactSequence: Handler<'pauseContactSequence'> = async ({ trx, auth, params, body }) => ({
  status: 200,
  body: await pauseContactSequences(trx, auth.organizationId, params.id, body?.reason ?? null),
});

export const contactHandlers = {
  listContacts,
  createContact,
  getContact,
  updateContact,
  deleteContact,
  eraseContact,
  getContactResearch,
  researchContact,
  pauseContactSequence,
} satisfies Partial<Handlers>;
