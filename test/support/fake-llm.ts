// A fake OpenAI-compatible model on loopback that a test programs answer by answer: a good
// answer, an invented fact, malformed JSON, a 429 with Retry-After, a 5xx, a hang, a 400 that
// rejects json_schema. It records every call and how many were in flight at once.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeModelCall {
  body: any;
  index: number;
  headers: http.IncomingHttpHeaders;
}
export interface FakeAnswer {
  /** The assistant message content (wrapped in a chat.completion). */
  content?: string;
  /** A whole custom response body instead. */
  json?: unknown;
  status?: number;
  headers?: Record<string, string>;
  delayMs?: number;
  /** Never answer (until the client gives up). */
  hang?: boolean;
  usage?: { prompt_tokens: number; completion_tokens: number } | null;
}

export interface FakeModel {
  /** The base URL to configure as LLM_BASE_URL (ends in /v1). */
  baseUrl: string;
  calls: FakeModelCall[];
  readonly maxInFlight: number;
  answer(fn: (call: FakeModelCall) => FakeAnswer | Promise<FakeAnswer>): void;
  reset(): void;
  close(): Promise<void>;
}

export async function startFakeModel(): Promise<FakeModel> {
  let handler: (call: FakeModelCall) => FakeAnswer | Promise<FakeAnswer> = () => ({ content: '{}' });
  const calls: FakeModelCall[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const open = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      if (req.method !== 'POST' || !/\/chat\/completions$/.test(req.url ?? '')) {
        res.writeHead(404).end();
        return;
      }
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      open.add(res);
      res.on('close', () => {
        inFlight -= 1;
        open.delete(res);
      });
      let body: any;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        body = null;
      }
      const call = { body, index: calls.length, headers: req.headers };
      calls.push(call);
      const a = await handler(call);
      if (a.hang) return;
      if (a.delayMs) await new Promise((r) => setTimeout(r, a.delayMs));
      if (res.destroyed) return;
      const status = a.status ?? 200;
      const usage = a.usage === null ? undefined : (a.usage ?? { prompt_tokens: 100, completion_tokens: 50 });
      const out =
        a.json ??
        (status >= 400
          ? { error: { message: a.content ?? `error ${status}`, type: 'fake_error' } }
          : {
              id: `chatcmpl-${call.index}`,
              object: 'chat.completion',
              created: Math.floor(Date.now() / 1000),
              model: body?.model ?? 'fake',
              choices: [{ index: 0, message: { role: 'assistant', content: a.content ?? '{}' }, finish_reason: 'stop' }],
              ...(usage ? { usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } } : {}),
            });
      res.writeHead(status, { 'content-type': 'application/json', ...(a.headers ?? {}) });
      res.end(JSON.stringify(out));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    calls,
    get maxInFlight() {
      return maxInFlight;
    },
    answer(fn) {
      handler = fn;
    },
    reset() {
      calls.length = 0;
      maxInFlight = 0;
      handler = () => ({ content: '{}' });
    },
    close: () =>
      new Promise<void>((r) => {
        for (const res of open) res.destroy();
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
