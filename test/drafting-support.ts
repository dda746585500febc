// Shared set-up for the sequence, draft and list-generation suites: organizations with templates,
// contacts (optionally with a researched company), and waiting for the worker's queue to drain.

import { uid, uniqueEmail } from './crm-support.js';
import { ALL_SCOPES, type PublicClient, type ServiceClients, type TestService, waitFor } from './support/harness.js';

export const STEP_ONE = {
  dayOffset: 0,
  subject: 'A quick idea for {{company}}',
  body: 'Hi {{firstName}},\n\nWe help revenue teams book more qualified meetings without extra headcount.\n\nWould a short call next week be useful?\n\nBest,\nSam',
};
export const STEP_TWO = {
  dayOffset: 3,
  subject: 'Following up',
  body: 'Hello again {{firstName}}, checking whether my last note was useful. Worth a call?',
};

export interface DraftingOrg {
  org: Awaited<ReturnType<ServiceClients['newOrg']>>;
  key: string;
  api: PublicClient;
}

export async function draftingOrg(svc: ServiceClients, plan?: 'free' | 'starter' | 'growth'): Promise<DraftingOrg> {
  const org = await svc.newOrg(plan ? { plan } : {});
  const key = await org.key(ALL_SCOPES, { userId: org.ownerId });
  return { org, key, api: svc.api(key) };
}

export async function template(svc: ServiceClients, orgId: string, steps = [STEP_ONE, STEP_TWO], productId?: string): Promise<string> {
  const r = await svc.admin.POST('/organizations/{orgId}/sequence-templates', {
    params: { path: { orgId } },
    body: { name: uid('Template '), steps, ...(productId ? { productId } : {}) },
  });
  if (!r.data) throw new Error(`template: ${JSON.stringify(r.error)}`);
  return r.data.id;
}

export async function product(svc: TestService, orgId: string): Promise<string> {
  const r = await svc.admin.POST('/organizations/{orgId}/products', { params: { path: { orgId } }, body: { name: uid('Product ') } });
  if (!r.data) throw new Error(`product: ${JSON.stringify(r.error)}`);
  return r.data.id;
}

export async function contact(api: PublicClient, body: Record<string, unknown> = {}) {
  const r = await api.POST('/contacts', { body: { email: uniqueEmail(), name: 'Dana Whitfield', ...body } as never });
  if (r.response.status !== 201 || !r.data) throw new Error(`contact: ${r.response.status} ${JSON.stringify(r.error)}`);
  return r.data;
}

export async function sequence(api: PublicClient, contactId: string, templateId: string, extra: Record<string, unknown> = {}) {
  const r = await api.POST('/sequences', { body: { contactId, templateId, ...extra } });
  if (r.response.status !== 200 || !r.data) throw new Error(`sequence: ${r.response.status} ${JSON.stringify(r.error)}`);
  return r.data;
}

/** Waits until the background queue is empty (every job this file's requests caused has run). */
export async function settle(svc: ServiceClients, timeoutMs = 30_000): Promise<void> {
  await waitFor(
    async () => {
      const q = await svc.admin.GET('/queue');
      return q.data && q.data.pending + q.data.running === 0 ? true : null;
    },
    timeoutMs,
    'the job queue to drain',
  );
}

export async function draftsOf(api: PublicClient, contactId: string, includeSuperseded = false) {
  const r = await api.GET('/drafts', {
    params: { query: { contactId, limit: 200, ...(includeSuperseded ? { includeSuperseded: 'true' as const } : {}) } },
  });
  if (!r.data) throw new Error(`drafts: ${JSON.stringify(r.error)}`);
  return [...r.data.data].sort((a, b) => a.step - b.step || a.version - b.version);
}

export async function getSequence(api: PublicClient, id: string) {
  const r = await api.GET('/sequences/{id}', { params: { path: { id } } });
  if (!r.data) throw new Error(`sequence ${id}: ${JSON.stringify(r.error)}`);
  return r.data;
}
