// The one model client: an OpenAI-compatible chat completions endpoint (OpenAI, Ollama, vLLM,
// llama.cpp server) through the official `openai` package, asked for a JSON answer valid against
// a schema. It owns timeouts, retries with backoff (429, 5xx, timeouts, connection errors, and
// malformed answers, which are asked again), the bound on concurrent calls, the bound on an
// answer's size (MAX_ANSWER_BYTES, counted while it streams), and token and cost metering. With no
// LLM_BASE_URL it reports the provider `fallback` and is never called.

import type { ValidateFunction } from 'ajv';
import Ajv2020 from 'ajv/dist/2020.js';
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError } from 'openai';
import pLimit from 'p-limit';
import type { Logger } from 'pino';
import type { Config } from '../platform/config.js';
import { costCents } from './pricing.js';

export interface ModelUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  costCents: number;
}
export type ModelErrorKind = 'timeout' | 'rate-limited' | 'server' | 'refused' | 'malformed' | 'network';

export class ModelError extends Error {
  constructor(
    readonly kind: ModelErrorKind,
    message: string,
    readonly attempts: number,
    readonly usage: ModelUsage,
  ) {
    super(message);
  }
}

export interface StructuredRequest {
  system: string;
  user: string;
  /** Name and JSON Schema the answer must follow (the subset structured outputs accept). */
  schemaName: string;
  schema: Record<string, unknown>;
  maxTokens?: number;
  temperature?: number;
}

export interface StructuredResult<T> {
  value: T;
  model: string;
  usage: ModelUsage;
  attempts: number;
}

export interface ModelClient {
  /** The effective model id, or `fallback` when no model is configured. */
  readonly provider: string;
  readonly enabled: boolean;
  /** A JSON answer valid against req.schema; throws ModelError once the retries are spent. */
  complete<T>(req: StructuredRequest): Promise<StructuredResult<T>>;
}

const MAX_BACKOFF_MS = 8000;
/** The most of one answer read, in bytes: a chat completion of a few thousand tokens is a few KiB. */
export const MAX_ANSWER_BYTES = 4 * 1024 * 1024;

class AnswerTooLarge extends Error {}

/**
 * fetch for the model client whose answers (successes and errors alike) are read up to `max`
 * bytes: counted as they stream, whatever they declare, and cut there (the connection is dropped),
 * so a misbehaving server cannot fill the process's memory within the call's time limit.
 */
function boundedFetch(max: number): typeof fetch {
  return async (input, init) => {
    const res = await fetch(input, init);
    if (!res.body) return res;
    let seen = 0;
    const counted = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          seen += chunk.byteLength;
          if (seen > max) controller.error(new AnswerTooLarge(`the answer is larger than ${max} bytes`));
          else controller.enqueue(chunk);
        },
      }),
    );
    return new Response(counted, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}
const zero = (): ModelUsage => ({ promptTokens: 0, completionTokens: 0, totalTokens: 0, costCents: 0 });

/** The JSON of an answer, also when a model wraps it in a ```json fence. */
export function parseAnswer(content: string): unknown {
  const fenced = /^\s*```(?:json)?\s*([\s\S]*?)\s*```\s*$/i.exec(content);
  return JSON.parse(fenced ? fenced[1] : content);
}

/** What a failed call was, and whether asking again can help. */
function classify(e: unknown): { kind: ModelErrorKind; retry: boolean; waitMs: number | null } {
  // A server that answers this much is misbehaving; asking it again would only read as much again.
  if (e instanceof AnswerTooLarge || (e as { cause?: unknown })?.cause instanceof AnswerTooLarge)
    return { kind: 'malformed', retry: false, waitMs: null };
  if (e instanceof APIConnectionTimeoutError) return { kind: 'timeout', retry: true, waitMs: null };
  if (e instanceof APIConnectionError) return { kind: 'network', retry: true, waitMs: null };
  if (e instanceof APIError) {
    const s = e.status ?? 0;
    const h = e.headers;
    const ms = Number(h?.get?.('retry-after-ms'));
    const sec = Number(h?.get?.('retry-after'));
    const waitMs = Number.isFinite(ms) && ms > 0 ? ms : Number.isFinite(sec) && sec > 0 ? sec * 1000 : null;
    if (s === 429) return { kind: 'rate-limited', retry: true, waitMs };
    if (s >= 500 || s === 408 || s === 409) return { kind: 'server', retry: true, waitMs };
    return { kind: 'refused', retry: false, waitMs: null };
  }
  return { kind: 'network', retry: true, waitMs: null };
}

const backoff = (attempt: number) => Math.min(MAX_BACKOFF_MS, 250 * 2 ** attempt) * (0.75 + Math.random() * 0.5);

/** A server that rejects `json_schema` answers 400 naming it; such servers get `json_object`. */
const rejectsJsonSchema = (e: unknown) =>
  e instanceof APIError && e.status === 400 && /response_format|json_schema/i.test(String(e.message));

export function createModelClient(config: Config, log: Logger): ModelClient {
  if (!config.llmBaseUrl || !config.llmModel) {
    return {
      provider: 'fallback',
      enabled: false,
      complete: async () => {
        throw new Error('no language model is configured (LLM_BASE_URL)');
      },
    };
  }
  const model = config.llmModel;
  const client = new OpenAI({
    baseURL: config.llmBaseUrl,
    apiKey: config.llmApiKey ?? 'none',
    timeout: config.llmTimeoutMs,
    maxRetries: 0,
    fetch: boundedFetch(MAX_ANSWER_BYTES),
  });
  const limit = pLimit(config.llmConcurrency);
  const ajv = new Ajv2020.default({ strict: false, allErrors: false });
  const validators = new Map<string, ValidateFunction>();
  let jsonObjectOnly = false;

  async function once(req: StructuredRequest, validate: ValidateFunction) {
    const system = jsonObjectOnly
      ? `${req.system}\nYour answer must be JSON valid against this JSON Schema:\n${JSON.stringify(req.schema)}`
      : req.system;
    const r = await client.chat.completions.create({
      model,
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: req.user },
      ],
      temperature: req.temperature ?? 0.2,
      ...(req.maxTokens ? { max_tokens: req.maxTokens } : {}),
      response_format: jsonObjectOnly
        ? { type: 'json_object' }
        : { type: 'json_schema', json_schema: { name: req.schemaName, schema: req.schema, strict: true } },
    });
    const content = r.choices[0]?.message?.content ?? '';
    const reported = r.usage;
    const promptTokens = reported?.prompt_tokens ?? Math.ceil((system.length + req.user.length) / 4);
    const completionTokens = reported?.completion_tokens ?? Math.ceil(content.length / 4);
    let value: unknown;
    let problem: string | null = null;
    try {
      value = parseAnswer(content);
      if (!validate(value)) problem = `the answer does not follow the schema (${ajv.errorsText(validate.errors)})`;
    } catch {
      problem = 'the answer is not JSON';
    }
    return { value, problem, promptTokens, completionTokens, model: r.model || model };
  }

  async function complete<T>(req: StructuredRequest): Promise<StructuredResult<T>> {
    let validate = validators.get(req.schemaName);
    if (!validate) {
      validate = ajv.compile(req.schema);
      validators.set(req.schemaName, validate);
    }
    const usage = zero();
    const add = (p: number, c: number) => {
      usage.promptTokens += p;
      usage.completionTokens += c;
      usage.totalTokens += p + c;
      usage.costCents = costCents(model, usage.promptTokens, usage.completionTokens, config);
    };
    let last: { kind: ModelErrorKind; message: string } = { kind: 'network', message: 'no attempt made' };
    let attempts = 0;
    while (attempts <= config.llmMaxRetries) {
      attempts += 1;
      try {
        const r = await once(req, validate);
        add(r.promptTokens, r.completionTokens);
        if (r.problem === null) return { value: r.value as T, model: r.model, usage: { ...usage }, attempts };
        last = { kind: 'malformed', message: r.problem };
        log.warn({ model, kind: 'malformed', attempt: attempts }, 'model answer refused; asking again');
      } catch (e) {
        if (!jsonObjectOnly && rejectsJsonSchema(e)) {
          jsonObjectOnly = true;
          attempts -= 1; // the server's capability, not a failed attempt
          log.warn({ model }, 'the model server does not take json_schema answers; asking for json_object');
          continue;
        }
        const c = classify(e);
        last = { kind: c.kind, message: (e as Error).message };
        log.warn({ model, kind: c.kind, attempt: attempts }, 'model call failed');
        if (!c.retry) break;
        if (attempts <= config.llmMaxRetries) await new Promise((res) => setTimeout(res, c.waitMs ?? backoff(attempts - 1)));
      }
    }
    throw new ModelError(last.kind, `${model}: ${last.message}`, attempts, { ...usage });
  }

  return { provider: model, enabled: true, complete: <T>(req: StructuredRequest) => limit(() => complete<T>(req)) };
}
