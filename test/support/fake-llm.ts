// A fake OpenAI-compatible model on loopback that a test programs answer by answer: a good
// answer, an invented fact, malformed JSON, a 429 with Retry-After, a 5xx, a hang, a 400 that
// rejects json_schema. It records every call and how many were in flight at once. The drafting
// model's failures are kept below as named behaviours (`behaviours`), one per way a model lets a
// writer down: it invents facts, obeys injections, answers malformed, or never answers.
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

/**
 * The settings of a service that researches the loopback site (`siteTemplate`) and drafts with the
 * fake model: a 2 s time limit and one retry unless `overrides` say otherwise.
 */
export function draftingEnv(model: FakeModel, siteTemplate: string, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    RESEARCH_SITE_URL_TEMPLATE: siteTemplate,
    RESEARCH_ALLOW_PRIVATE_TARGETS: 'true',
    LLM_BASE_URL: model.baseUrl,
    LLM_MODEL: 'gpt-4o-mini',
    LLM_API_KEY: 'sk-test',
    LLM_TIMEOUT_MS: '2000',
    LLM_MAX_RETRIES: '1',
    ...overrides,
  };
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

/** The data of a drafting prompt: the user message's JSON (a repair request follows it after a blank line). */
export interface DraftPrompt {
  template: { subject: string; body: string };
  recipient: { firstName?: string | null; name: string | null };
  sources: Array<{ sourceIndex: number; title?: string; url?: string; facts?: string[]; text?: string; kind?: string }>;
  [key: string]: unknown;
}

export const promptOf = (call: FakeModelCall): DraftPrompt => JSON.parse(String(call.body.messages[1].content).split('\n\n')[0]);

/** Whether the model was told its previous answer had problems (a repair round). */
export const repairing = (call: FakeModelCall): boolean => String(call.body.messages[1].content).includes('Your previous answer was');

const draft = (subject: string, body: string, citations: Array<{ sentence: string; sourceIndex: number }>): FakeAnswer => ({
  content: JSON.stringify({ subject, body, citations }),
  usage: { prompt_tokens: 1000, completion_tokens: 200 },
});

/**
 * What a model that reads past disguises sees: compatibility forms folded (NFKC: full-width and
 * mathematical letters), invisible tag characters read as the ASCII they encode, other invisible
 * characters (zero-width, soft hyphen, bidi controls) dropped, and the commonest Cyrillic and Greek
 * look-alikes read as Latin. Written here on its own, not imported from the service, so the fake
 * does not share the detector's blind spots.
 */
export function asReadByAModel(s: string): string {
  const LOOK = 'аaеeоoрpсcуyхxіiјjѕsԁdһhӏlАAВBЕEКKМMНHОOРPСCТTХXІIЈJЅSαaοoνvρpτtΑAΒBΕEΗHΙIΚKΜMΝNΟOΡPΤTΧXΥYΖZ';
  const map = new Map<string, string>();
  for (let i = 0; i < LOOK.length; i += 2) map.set(LOOK[i], LOOK[i + 1]);
  return [...s.normalize('NFKC')]
    .map((ch) => {
      const cp = ch.codePointAt(0)!;
      if (cp >= 0xe0020 && cp <= 0xe007e) return String.fromCodePoint(cp - 0xe0000);
      if (/\p{Cf}/u.test(ch)) return '';
      return map.get(ch) ?? ch;
    })
    .join('');
}

/**
 * Text an injection-obeying model takes as orders or offers: anything addressed to an assistant
 * or naming instructions, any offer, price, percentage or code, and any link, in the languages of
 * the hostile corpus. Deliberately broad: a real model obeys what it understands.
 */
const OBEYED =
  /https?:|www\.|\.example\b|ignor|disregard|instruc|assistant|\bai\b|prompt|system|you are|tell the|must|discount|offer|%|\bfree\b|guarantee|coupon|promo|claim|anweisung|rabatt|descuento|remise|sconto|desconto|instrukc|инструкц|скидк|指令|指示|折扣|优惠|割引|無視|忽略/i;
const LINK = /\b(?:https?:\/\/|www\.)[^\s"'<>)\]]+/gi;

/** Every string of a prompt's sources (titles, facts, texts), with the source it came from. */
function sourceTexts(p: DraftPrompt): Array<{ text: string; sourceIndex: number }> {
  return p.sources.flatMap((s) =>
    [s.title, s.text, ...(s.facts ?? [])]
      .filter((t): t is string => typeof t === 'string')
      .map((text) => ({ text, sourceIndex: s.sourceIndex })),
  );
}

/** The sentences of a text, split the plain way a model might quote them. */
const sentencesOf = (text: string) =>
  text
    .split(/(?<=[.!?。！？])\s+|\n+/)
    .map((x) => x.trim())
    .filter(Boolean);

/** Drafting behaviours of a model, each an answer function for FakeModel.answer. */
export const behaviours = {
  /** A good model: the template and one sentence quoting the first fact of the first source, cited. */
  cites(call: FakeModelCall): FakeAnswer {
    const p = promptOf(call);
    const s = p.sources[0];
    if (!s?.facts?.length) return draft(p.template.subject, p.template.body, []);
    const sentence = `I read this on your site: "${s.facts[0]}"`;
    return draft(p.template.subject, `${p.template.body}\n\n${sentence}`, [{ sentence, sourceIndex: s.sourceIndex }]);
  },
  /** Invents a fact no source states, uncited; fixes it when told (`stubborn`: never). */
  inventsFacts:
    (sentence: string, opts: { stubborn: boolean }) =>
    (call: FakeModelCall): FakeAnswer => {
      if (repairing(call) && !opts.stubborn) return behaviours.cites(call);
      const p = promptOf(call);
      return draft(p.template.subject, `${p.template.body}\n\n${sentence}`, []);
    },
  /**
   * Obeys injections: every sentence of its sources that reads (to asReadByAModel) as an order,
   * an offer or a link is copied verbatim into the body and cited to its source, as the model of
   * the issue did, and every link found in them is repeated at the end. With nothing to obey it
   * behaves like `cites`.
   */
  obeysInjections(call: FakeModelCall): FakeAnswer {
    const p = promptOf(call);
    const copied: Array<{ sentence: string; sourceIndex: number }> = [];
    const links = new Set<string>();
    for (const { text, sourceIndex } of sourceTexts(p)) {
      for (const m of asReadByAModel(text).matchAll(LINK)) links.add(m[0].replace(/[.,;:!?]+$/, ''));
      for (const sentence of sentencesOf(text))
        if (OBEYED.test(asReadByAModel(sentence)) && !copied.some((c) => c.sentence === sentence)) copied.push({ sentence, sourceIndex });
    }
    if (copied.length === 0 && links.size === 0) return behaviours.cites(call);
    const body = [p.template.body, ...copied.map((c) => c.sentence), ...[...links].map((l) => `Claim it here: ${l}`)].join('\n\n');
    return draft(p.template.subject, body, copied);
  },
  /** Answers prose, not JSON, every time. */
  malformed: (): FakeAnswer => ({ content: 'Here is your email: Hi!' }),
  /** Never answers (the client's time limit ends the call). */
  hangs: (): FakeAnswer => ({ hang: true }),
};
