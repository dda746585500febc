// A list generation run followed while it runs, through the SDK (clients/typescript): with the
// model held mid-run, the run reads `running` with its chunk's sequences counted and no draft yet;
// released, it completes with its drafts (written from the fallback template: the model fails).
// A run whose chunk's job fails its last attempt reads `failed` and no longer holds its list.

import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOutboundClient } from '../clients/typescript/src/index.js';
import { system, uid } from './crm-support.js';
import { contact, draftingOrg, STEP_ONE, settle, template } from './drafting-support.js';
import { type FakeModel, startFakeModel } from './support/fake-llm.js';
import { startService, type TestService, waitFor } from './support/harness.js';

let svc: TestService;
let model: FakeModel;
beforeAll(async () => {
  model = await startFakeModel();
  svc = await startService({
    LLM_BASE_URL: model.baseUrl,
    LLM_MODEL: 'gpt-4o-mini',
    LLM_API_KEY: 'sk-test',
    LLM_TIMEOUT_MS: '30000',
    LLM_MAX_RETRIES: '0',
  });
});
let worker: Promise<unknown> | null = null;
const startWorker = () => {
  worker ??= svc.startWorker();
  return worker;
};
afterAll(async () => {
  await svc?.close();
  await model?.close();
});

describe('GET /lists/{id}/generation-runs/{runId}', () => {
  it('reads failed when a chunk fails its last attempt, and the list is free for a new run', async () => {
    const s = await draftingOrg(svc);
    const l = await s.api.POST('/lists', { body: { name: uid('Failing '), useCaseTemplateId: await template(svc, s.org.id, [STEP_ONE]) } });
    await contact(s.api, { listId: l.data!.id });
    const started = (await s.api.POST('/lists/{id}/generate', { params: { path: { id: l.data!.id } } })).data!;
    // Before any worker runs: the chunk's job gets one attempt, and its counter update will overflow.
    await svc.pool.query(`UPDATE graphile_worker._private_jobs SET max_attempts = 1 WHERE payload->>'runId' = $1`, [started.runId]);
    await system(svc, (trx) =>
      sql`UPDATE list_generation_runs SET sequences_created = 2147483647 WHERE id = ${started.runId}`.execute(trx),
    );
    await startWorker();
    const path = { id: l.data!.id, runId: started.runId };
    const failed = await waitFor(
      async () => {
        const r = (await s.api.GET('/lists/{id}/generation-runs/{runId}', { params: { path } })).data!;
        return r.state === 'failed' ? r : null;
      },
      20_000,
      'the run to fail',
    );
    expect(failed).toMatchObject({ chunksDone: 0, draftsGenerated: 0, finishedAt: expect.any(String) });
    expect((await s.api.POST('/lists/{id}/generate', { params: { path: { id: l.data!.id } } })).data).toMatchObject({
      generationQueued: true,
    });
    await settle(svc);
  });

  it('is readable while the run is running and after it completed (SDK)', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    await startWorker();
    model.reset();
    model.answer(async () => {
      await gate;
      return { status: 503 };
    });
    const s = await draftingOrg(svc);
    const sdk = createOutboundClient({ baseUrl: svc.baseUrl, apiKey: s.key });
    const l = await sdk.POST('/lists', { body: { name: uid('Followed '), useCaseTemplateId: await template(svc, s.org.id, [STEP_ONE]) } });
    for (let i = 0; i < 2; i++) await contact(s.api, { listId: l.data!.id });
    const started = await sdk.POST('/lists/{id}/generate', { params: { path: { id: l.data!.id } } });
    expect(started.data).toMatchObject({ generationQueued: true, draftsToWrite: 2 });
    const path = { id: l.data!.id, runId: started.data!.runId };
    await waitFor(async () => (model.calls.length > 0 ? true : null), 20_000, 'the model to be asked');
    const running = await sdk.GET('/lists/{id}/generation-runs/{runId}', { params: { path } });
    expect(running.response.status).toBe(200);
    expect(running.data).toMatchObject({
      state: 'running',
      chunksDone: 0,
      sequencesCreated: 2,
      draftsGenerated: 0,
      allowanceUsed: 0,
      startedAt: expect.any(String),
      finishedAt: null,
    });
    release();
    await settle(svc);
    const done = await sdk.GET('/lists/{id}/generation-runs/{runId}', { params: { path } });
    expect(done.data).toMatchObject({ state: 'completed', chunksDone: 1, draftsGenerated: 2, draftsFailed: 0, allowanceUsed: 2 });
    const latest = await sdk.GET('/lists/{id}/generation-runs', { params: { path: { id: l.data!.id }, query: { limit: 1 } } });
    expect(latest.data!.data.map((r) => r.id)).toEqual([started.data!.runId]);
  });
});
