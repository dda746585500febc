// The model client against a fake OpenAI-compatible server on loopback.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createModelClient, MAX_ANSWER_BYTES, ModelError, parseAnswer } from '../src/llm/client.js';
import { ConfigError, loadConfig } from '../src/platform/config.js';
import { createLogger } from '../src/platform/logger.js';
import { type FakeModel, startFakeModel } from './support/fake-llm.js';

let fake: FakeModel;
beforeAll(async () => {
  fake = await startFakeModel();
});
afterAll(async () => {
  await fake?.close();
});
beforeEach(() => fake.reset());

const SCHEMA = { type: 'object', additionalProperties: false, required: ['answer'], properties: { answer: { type: 'string' } } };
const ask = { system: 'Be brief.', user: 'Say hi.', schemaName: 'greeting', schema: SCHEMA };
// A time limit a loaded machine's loopback answer cannot reach (a call over it would be retried and
// counted twice); the hang case sets a short one of its own.
const client = (env: Record<string, string> = {}) =>
  createModelClient(
    loadConfig({
      LLM_BASE_URL: fake.baseUrl,
      LLM_MODEL: 'gpt-4o-mini',
      LLM_API_KEY: 'sk-test',
      LLM_TIMEOUT_MS: '20000',
      ...env,
    }),
    createLogger('silent'),
  );

describe('configuration', () => {
  it('is the fallback provider without LLM_BASE_URL; a base URL needs a model; bad numbers name the variable', () => {
    const none = createModelClient(loadConfig({}), createLogger('silent'));
    expect(none).toMatchObject({ provider: 'fallback', enabled: false });
    expect(() => loadConfig({ LLM_BASE_URL: 'http://x.example/v1' })).toThrow(/LLM_MODEL/);
    expect(() => loadConfig({ LLM_BASE_URL: 'ftp://x' })).toThrow(/LLM_BASE_URL/);
    for (const [k, v] of [
      ['LLM_CONCURRENCY', '0'],
      ['LLM_TIMEOUT_MS', 'soon'],
      ['LLM_MAX_RETRIES', '-1'],
      ['LLM_PRICE_INPUT_CENTS_PER_MTOK', 'free'],
    ]) {
      expect(() => loadConfig({ [k]: v }), k).toThrow(ConfigError);
      expect(() => loadConfig({ [k]: v }), k).toThrow(new RegExp(k));
    }
  });
});

describe('complete', () => {
  it('asks for a json_schema answer, parses it and meters tokens and cost (priced and free models, overrides)', async () => {
    fake.answer(() => ({ content: '{"answer":"hi"}', usage: { prompt_tokens: 1_000_000, completion_tokens: 500_000 } }));
    const r = await client().complete<{ answer: string }>(ask);
    expect(r).toMatchObject({ value: { answer: 'hi' }, model: 'gpt-4o-mini', attempts: 1 });
    expect(r.usage).toEqual({ promptTokens: 1_000_000, completionTokens: 500_000, totalTokens: 1_500_000, costCents: 15 + 30 });
    const sent = fake.calls[0];
    expect(sent.body).toMatchObject({
      model: 'gpt-4o-mini',
      response_format: { type: 'json_schema', json_schema: { name: 'greeting', schema: SCHEMA, strict: true } },
    });
    expect(sent.body.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Say hi.' },
    ]);
    expect(sent.headers.authorization).toBe('Bearer sk-test');
    const local = await client({ LLM_MODEL: 'llama3.1:8b' }).complete(ask);
    expect(local.usage.costCents).toBe(0);
    const priced = await client({
      LLM_MODEL: 'llama3.1:8b',
      LLM_PRICE_INPUT_CENTS_PER_MTOK: '10',
      LLM_PRICE_OUTPUT_CENTS_PER_MTOK: '20',
    }).complete(ask);
    expect(priced.usage.costCents).toBe(10 + 10); // 1M input at 10, 0.5M output at 20
  });

  it('estimates tokens when the server reports none, and accepts an answer in a ```json fence', async () => {
    fake.answer(() => ({ content: '```json\n{"answer":"hello there"}\n```', usage: null }));
    const r = await client().complete<{ answer: string }>(ask);
    expect(r.value).toEqual({ answer: 'hello there' });
    expect(r.usage.promptTokens).toBe(Math.ceil(('Be brief.'.length + 'Say hi.'.length) / 4));
    expect(r.usage.completionTokens).toBeGreaterThan(0);
    expect(parseAnswer('  {"a":1} ')).toEqual({ a: 1 });
  });

  it('waits out a 429 with Retry-After and succeeds, summing the usage of both attempts', async () => {
    fake.answer((c) => (c.index === 0 ? { status: 429, headers: { 'retry-after': '1' }, usage: null } : { content: '{"answer":"ok"}' }));
    const started = Date.now();
    const r = await client().complete(ask);
    expect(r.attempts).toBe(2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(fake.calls).toHaveLength(2);
  });

  it('gives up after the retries: 5xx is "server", a hang "timeout", 401 "refused" at once', async () => {
    fake.answer(() => ({ status: 503 }));
    const e1 = await client({ LLM_MAX_RETRIES: '2' })
      .complete(ask)
      .catch((e) => e);
    expect(e1).toBeInstanceOf(ModelError);
    expect(e1).toMatchObject({ kind: 'server', attempts: 3 });
    expect(fake.calls).toHaveLength(3);
    fake.reset();
    fake.answer(() => ({ hang: true }));
    const e2 = await client({ LLM_MAX_RETRIES: '1', LLM_TIMEOUT_MS: '400' })
      .complete(ask)
      .catch((e) => e);
    expect(e2).toMatchObject({ kind: 'timeout', attempts: 2 });
    fake.reset();
    fake.answer(() => ({ status: 401 }));
    const e3 = await client()
      .complete(ask)
      .catch((e) => e);
    expect(e3).toMatchObject({ kind: 'refused', attempts: 1 });
    expect(fake.calls).toHaveLength(1);
  });

  it('asks again for malformed answers (not JSON, not the schema), then fails "malformed" with the tokens spent', async () => {
    fake.answer((c) => ({ content: c.index % 2 === 0 ? 'Sure! Here you go: hi' : '{"answer": 42}' }));
    const e = await client({ LLM_MAX_RETRIES: '2' })
      .complete(ask)
      .catch((x) => x);
    expect(e).toMatchObject({ kind: 'malformed', attempts: 3 });
    expect(e.usage.totalTokens).toBe(450);
    fake.reset();
    fake.answer((c) => ({ content: c.index === 0 ? 'not json' : '{"answer":"fixed"}' }));
    expect((await client().complete(ask)).value).toEqual({ answer: 'fixed' });
  });

  it('falls back to json_object (schema in the system message) for a server that rejects json_schema', async () => {
    fake.answer((c) =>
      c.body.response_format.type === 'json_schema'
        ? { status: 400, content: "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model." }
        : { content: '{"answer":"ok"}' },
    );
    const m = client();
    const r = await m.complete(ask);
    expect(r).toMatchObject({ value: { answer: 'ok' }, attempts: 1 });
    expect(fake.calls[1].body.response_format).toEqual({ type: 'json_object' });
    expect(fake.calls[1].body.messages[0].content).toContain('"required":["answer"]');
    await m.complete(ask);
    expect(fake.calls).toHaveLength(3); // remembered: no second json_schema try
  });

  it('keeps at most LLM_CONCURRENCY calls in flight', async () => {
    // The first three answers wait until all three are in flight, so the limit is reached however
    // slowly the calls arrive; the rest overlap by their delay.
    let three!: () => void;
    const allThree = new Promise<void>((r) => {
      three = r;
    });
    fake.answer(async (c) => {
      if (c.index === 2) three();
      if (c.index < 3) await allThree;
      return { content: '{"answer":"ok"}', delayMs: 60 };
    });
    const m = client({ LLM_CONCURRENCY: '3' });
    await Promise.all(Array.from({ length: 12 }, () => m.complete(ask)));
    expect(fake.calls).toHaveLength(12);
    expect(fake.maxInFlight).toBe(3);
  });

  it('reads at most MAX_ANSWER_BYTES of an answer that never ends, cut while it streams: malformed, not asked again (an error status: each answer cut)', async () => {
    const MiB = 1024 * 1024;
    // A server that answers JSON without end (up to a bound, so a client reading it all still ends).
    const written: number[] = [];
    let status = 200;
    const server = http.createServer((req, res) => {
      req.resume();
      const i = written.push(0) - 1;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.write('{"choices":[{"message":{"content":"');
      const chunk = Buffer.alloc(64 * 1024, 'a');
      const pump = () => {
        while (written[i] < 100 * MiB && !res.destroyed) {
          written[i] += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end('"}}]}');
      };
      res.on('error', () => {});
      pump();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
      for (const s of [200, 500]) {
        status = s;
        written.length = 0;
        const started = Date.now();
        const e = await client({ LLM_BASE_URL: baseUrl, LLM_MAX_RETRIES: '2', LLM_TIMEOUT_MS: '30000' })
          .complete(ask)
          .catch((x) => x);
        expect(e, String(s)).toBeInstanceOf(ModelError);
        // An error status stays what it is (a 5xx is asked again); each answer is cut all the same.
        expect(e, String(s)).toMatchObject(s === 200 ? { kind: 'malformed', attempts: 1 } : { kind: 'server', attempts: 3 });
        expect(Date.now() - started).toBeLessThan(15_000);
        expect(written, String(s)).toHaveLength(e.attempts);
        // The cap, and what the sockets between the two ends buffer besides.
        for (const w of written) expect(w, String(s)).toBeLessThan(MAX_ANSWER_BYTES + 24 * MiB);
      }
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
