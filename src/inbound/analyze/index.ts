// PLACEHOLDER, replaced at merge by the mail analysis of issue 14 (src/inbound/analyze/ is built
// in another branch). Just enough, with the signatures of src/inbound/analysis.ts, for the
// ingestion pipeline and its tests to run: mailparser for the fields, a naive quote cut, automatic
// mail from a few headers, RFC 3464 / RFC 5965 reports, and a handful of phrase rules. No model.
import { simpleParser, type AddressObject, type SimpleParserOptions } from 'mailparser';
import type { ModelClient } from '../../llm/client.js';
import type { Classification, ComplaintReport, DeliveryReport, ParsedMail } from '../analysis.js';

const bracket = (id: string | undefined | null) => (id ? (id.trim().startsWith('<') ? id.trim() : `<${id.trim()}>`) : null);
const addrs = (a: AddressObject | AddressObject[] | undefined) => (a ? (Array.isArray(a) ? a : [a]) : [])
  .flatMap((x) => x.value).map((v) => v.address?.toLowerCase()).filter((x): x is string => !!x);

/** Header fields of a text block (a report part): name (lowercased) -> values. */
function fields(block: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const line of block.replace(/\r?\n[ \t]+/g, ' ').split(/\r?\n/)) {
    const m = /^([A-Za-z0-9-]+):\s*(.*)$/.exec(line);
    if (m) out.set(m[1].toLowerCase(), [...(out.get(m[1].toLowerCase()) ?? []), m[2].trim()]);
  }
  return out;
}
const typed = (v: string | undefined) => (v ? v.replace(/^[^;]*;\s*/, '').replace(/^<|>$/g, '').trim().toLowerCase() : null);

function stripQuotes(text: string): string {
  const lines = text.split(/\r?\n/);
  const out: string[] = [];
  for (let i = 0; i < lines.length; i += 1) {
    const l = lines[i];
    if (/^\s*>/.test(l) || /^-- ?$/.test(l) || /^_{8,}\s*$/.test(l) || /^-+\s*Original Message\s*-+/i.test(l)) break;
    if (/^On\b/.test(l) && (/wrote:\s*$/.test(l) || /wrote:\s*$/.test(`${l} ${lines[i + 1] ?? ''}`))) break;
    out.push(l);
  }
  return out.join('\n').trim();
}

export async function parseMail(raw: Buffer | string): Promise<ParsedMail> {
  const m = await simpleParser(raw, { keepDeliveryStatus: true, skipImageLinks: true, skipTextToHtml: true } as SimpleParserOptions).catch(() => null);
  if (!m) return { messageId: null, inReplyTo: null, references: [], from: null, to: [], subject: null, date: null, text: '', strippedText: '', automatic: { automatic: false, reason: null }, report: null, headers: {} };
  const h = (name: string) => { const v = m.headers.get(name); return typeof v === 'string' ? v : v && typeof v === 'object' && 'value' in v ? String((v as { value: unknown }).value) : v === undefined ? undefined : String(v); };
  const from = m.from?.value[0]?.address ? { address: m.from.value[0].address.toLowerCase(), name: m.from.value[0].name || null } : null;
  const text = m.text ?? '';
  const ct = m.headers.get('content-type') as { value?: string; params?: Record<string, string> } | undefined;
  let report: DeliveryReport | ComplaintReport | null = null;
  const original = m.attachments.find((a) => ['text/rfc822-headers', 'message/rfc822'].includes(a.contentType));
  const originalId = original ? bracket(fields(original.content.toString('utf8').split(/\r?\n\r?\n/)[0]).get('message-id')?.[0]) : null;
  if (ct?.value === 'multipart/report' && ct.params?.['report-type'] === 'delivery-status') {
    const part = m.attachments.find((a) => a.contentType === 'message/delivery-status');
    const blocks = part ? part.content.toString('utf8').split(/\r?\n\s*\r?\n/).slice(1).map(fields) : [];
    report = {
      kind: 'dsn', originalMessageId: originalId, heuristic: false,
      recipients: blocks.filter((b) => b.has('final-recipient')).map((b) => {
        const status = b.get('status')?.[0] ?? null;
        return { recipient: typed(b.get('final-recipient')?.[0])!, action: b.get('action')?.[0]?.toLowerCase() ?? null, status, diagnostic: b.get('diagnostic-code')?.[0] ?? null, permanent: status?.startsWith('5') ?? false };
      }),
    };
  } else if (ct?.value === 'multipart/report' && ct.params?.['report-type'] === 'feedback-report') {
    const part = m.attachments.find((a) => a.contentType === 'message/feedback-report');
    const f = fields(part?.content.toString('utf8') ?? '');
    report = { kind: 'arf', feedbackType: f.get('feedback-type')?.[0]?.toLowerCase() ?? null, recipient: typed(f.get('original-rcpt-to')?.[0]), originalMessageId: originalId };
  }
  const auto = h('auto-submitted');
  const reason = auto && auto.toLowerCase() !== 'no' ? `auto-submitted:${auto.toLowerCase()}`
    : /^yes$/i.test(h('x-autoreply') ?? '') ? 'x-autoreply'
      : /^(bulk|junk|list|auto_reply)$/i.test(h('precedence') ?? '') ? `precedence:${h('precedence')!.toLowerCase()}`
        : h('x-ms-exchange-inbox-rules-loop') ? 'exchange-inbox-rules-loop'
          : /^(mailer-daemon|postmaster)@/i.test(from?.address ?? '') ? 'sender:mailer-daemon'
            : /^(automatic reply|auto-reply|out of office)/i.test(m.subject ?? '') ? 'subject' : null;
  const refs = m.references === undefined ? [] : Array.isArray(m.references) ? m.references : m.references.split(/\s+/);
  const headers: Record<string, string> = {};
  for (const n of ['auto-submitted', 'x-autoreply', 'precedence', 'x-auto-response-suppress']) if (h(n)) headers[n] = h(n)!;
  return {
    messageId: bracket(m.messageId), inReplyTo: bracket(m.inReplyTo), references: refs.filter(Boolean).map((r) => bracket(r)!),
    from, to: [...addrs(m.to), ...addrs(m.cc)], subject: m.subject ?? null, date: m.date ?? null,
    text, strippedText: stripQuotes(text), automatic: { automatic: reason !== null || report !== null, reason: reason ?? (report ? 'report' : null) },
    report, headers,
  };
}

const RULES: [Classification['intent'], RegExp][] = [
  ['unsubscribe', /\b(unsubscribe|remove me|take me off|stop (emailing|contacting))\b/i],
  ['out_of_office', /\b(out of (the )?office|on vacation|on holiday|on leave|away from (the office|my desk))\b/i],
  ['meeting_request', /\b((book|schedule|set up|arrange) (a |some )?(call|meeting|time|demo)|send (me )?(an |a )?(calendar )?invite)\b/i],
  ['not_interested', /\b(not interested|no thanks|not a (good )?fit)\b/i],
  ['interested', /\b(interested|tell me more|sounds (good|great|interesting)|learn more)\b/i],
];

export async function classify(mail: ParsedMail, _deps: { model: ModelClient }): Promise<Classification> {
  const r = mail.report;
  if (r?.kind === 'dsn') {
    const worst = r.recipients.find((x) => x.permanent) ?? r.recipients[0];
    return { intent: 'bounce', confidence: 0.99, reason: `dsn:${worst?.status ?? 'unknown'}`, source: 'report', returnDate: null };
  }
  if (r?.kind === 'arf') return { intent: 'complaint', confidence: 0.99, reason: `arf:${r.feedbackType ?? 'unknown'}`, source: 'report', returnDate: null };
  const text = `${mail.subject ?? ''}\n${mail.strippedText || mail.text}`;
  for (const [intent, re] of RULES) {
    if (!re.test(text)) continue;
    if (mail.automatic.automatic && intent !== 'out_of_office') break;
    const date = intent === 'out_of_office' ? /\b(?:until|back on|return on|returning on|back)\s+(?:\w+day,?\s+)?([A-Z][a-z]+ \d{1,2},? \d{4}|\d{4}-\d{2}-\d{2})/.exec(text)?.[1] : undefined;
    const returnDate = date && !Number.isNaN(Date.parse(date)) ? new Date(Date.parse(date)) : null;
    return { intent, confidence: 0.8, reason: `rule:${intent}`, source: mail.automatic.automatic ? 'header' : 'rules', returnDate };
  }
  return { intent: 'other', confidence: 0.3, reason: mail.automatic.automatic ? 'automatic' : 'no-rule', source: 'default', returnDate: null };
}
