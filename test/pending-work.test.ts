// Operations whose work arrives with later issues (draft generation) already give
// every refusal a client can act on; only the run itself answers 501 not-implemented.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { raw, startService, type TestService } from './support/harness.js';
import { uniqueEmail, uid } from './crm-support.js';

let svc: TestService;
beforeAll(async () => { svc = await startService(); });
afterAll(async () => { await svc?.close(); });

const post = (key: string, path: string) => raw(svc.baseUrl, 'POST', `/api/v1${path}`, { key });

describe('POST /lists/{id}/generate', () => {
  it('answers 404 for an unknown or foreign list, 403 on the free plan, 400 for an empty list, else 501', async () => {
    const org = await svc.newOrg();
    const key = await org.key();
    const other = await svc.newOrg();
    const otherKey = await other.key();
    const { data: list } = await svc.api(key).POST('/lists', { body: { name: uid('L ') } });
    expect((await post(key, `/lists/${list!.id}/generate`)).body).toMatchObject({ status: 400 });
    expect((await post(key, '/lists/lst_000000000000000000000000/generate')).status).toBe(404);
    expect((await post(otherKey, `/lists/${list!.id}/generate`)).status).toBe(404);
    await svc.api(key).POST('/contacts', { body: { email: uniqueEmail(), listId: list!.id } });
    const run = await post(key, `/lists/${list!.id}/generate`);
    expect(run.status).toBe(501);
    expect(run.body.type).toBe(`${svc.baseUrl}/problems/not-implemented`);

    const free = await svc.newOrg({ plan: 'free' });
    const freeKey = await free.key();
    const { data: freeList } = await svc.api(freeKey).POST('/lists', { body: { name: uid('L ') } });
    await svc.api(freeKey).POST('/contacts', { body: { email: uniqueEmail(), listId: freeList!.id } });
    const refused = await post(freeKey, `/lists/${freeList!.id}/generate`);
    expect(refused.status).toBe(403);
    expect(refused.body.type).toBe(`${svc.baseUrl}/problems/not-entitled`);
  });
});
