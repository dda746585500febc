// Configuration is read once from the environment (docs/configuration.md) and validated at start: a bad
// value stops the start with one line naming the variable.
import { isIP } from 'node:net';

export interface Config {
  port: number;
  /** The address the HTTP server listens on (HOST). */
  host: string;
  databaseUrl: string | null;
  dataDir: string;
  adminToken: string | null;
  /** The base of the links in messages (unsubscribe, tracking) and of problem type URLs. */
  publicBaseUrl: string;
  /**
   * Lets messages go over a real SMTP server although PUBLIC_BASE_URL is not a public https URL
   * (local testing); otherwise such steps are held (`insecure_links`, src/mail/link-safety.ts).
   */
  allowInsecureLinks: boolean;
  erasureHashSecret: string | null;
  rateLimitPerMinute: number;
  webhookAllowPrivateTargets: boolean;
  webhookRetryDelaysSeconds: number[];
  webhookDisableAfterFailures: number;
  webhookTimeoutMs: number;
  webhookSecretKey: string | null;
  smtpUrl: string | null;
  /** Socket limits of one SMTP exchange (connect, greeting, each answer). */
  smtpTimeoutMs: number;
  /** Pooled connections per SMTP server. */
  smtpMaxConnections: number;
  /** The first backoff of a server or recipient domain that said "slow down"; doubled at each throttle in a row (src/dispatch/backoff.ts). */
  smtpThrottleBackoffMs: number;
  /** The deployment's sender, `Name <address>`. */
  mailFrom: { name: string | null; address: string };
  logLevel: string;
  /** The root of a company's site for research; `{domain}` is the normalized domain. */
  researchSiteUrlTemplate: string;
  researchAllowPrivateTargets: boolean;
  /** Exact `address:port` targets research may reach although private (see src/net/address.ts). */
  researchAllowedTargets: ReadonlySet<string>;
  /** Per-request limit of research fetches (DNS, connect, headers and body). */
  researchRequestTimeoutMs: number;
  /** Largest page body research reads (decompressed); a larger page is skipped. */
  researchMaxPageBytes: number;
  /** An OpenAI-compatible chat completions endpoint; null: the `fallback` provider. */
  llmBaseUrl: string | null;
  llmApiKey: string | null;
  llmModel: string | null;
  llmConcurrency: number;
  llmTimeoutMs: number;
  llmMaxRetries: number;
  /** Price overrides in cents per million tokens; null: the built-in table (src/llm/pricing.ts). */
  llmPriceInputCentsPerMtok: number | null;
  llmPriceOutputCentsPerMtok: number | null;
  /** Behind a trusted reverse proxy: a lead capture's client address is the last X-Forwarded-For entry. */
  trustProxy: boolean;
  /** Lead capture submissions per source address per organization per 10-minute window. */
  leadCaptureRateLimit: number;
  /** Port of the inbound SMTP listener (replies, bounces, complaints); null: no listener. */
  inboundSmtpPort: number | null;
  /** Address the listener binds. */
  inboundSmtpHost: string;
  /** Domain of the per-message reply address `reply+<token>@<domain>`; null: replies threaded by headers alone. */
  inboundReplyDomain: string | null;
  /** Largest inbound message accepted (advertised with SIZE, enforced at DATA). */
  inboundMaxMessageBytes: number;
  /**
   * DNS servers (`address[:port]`, as node:dns setServers takes them) that inbound mail is
   * authenticated with (SPF, DKIM, DMARC, ARC); null: the system resolver.
   */
  inboundDnsServers: string[] | null;
  /** The listener's abuse bounds (src/inbound/smtp-listener.ts; docs/configuration.md). */
  inboundLimits: InboundLimits;
  /** Whether `npm start` runs the background worker in the API process (false: API only; run `npm run worker` apart). */
  runWorker: boolean;
  /** A bearer token that may read GET /metrics besides the operator token; null: only the operator token. */
  metricsToken: string | null;
  /** Days each kind of aging data is kept (src/platform/retention.ts); an organization may override each. */
  retention: RetentionDays;
}

/** Days kept, per kind of data that ages out. */
export interface RetentionDays {
  events: number;
  webhookDeliveries: number;
  sendBodies: number;
  inboundRaw: number;
}

/**
 * Each kind's default, least and most days (also the bounds of an organization's override). The
 * least keep what the service itself reads back: the organization-health window (28 days) of the
 * event log, a delivery's 24 hours of retries, a send's body until its outcome is recorded, an
 * inbound message's MIME until it is classified (retried for hours).
 */
export const RETENTION_BOUNDS: Record<keyof RetentionDays, { env: string; def: number; min: number; max: number }> = {
  events: { env: 'RETENTION_EVENTS_DAYS', def: 400, min: 30, max: 3650 },
  webhookDeliveries: { env: 'RETENTION_WEBHOOK_DELIVERIES_DAYS', def: 30, min: 2, max: 3650 },
  sendBodies: { env: 'RETENTION_SEND_BODIES_DAYS', def: 90, min: 7, max: 3650 },
  inboundRaw: { env: 'RETENTION_INBOUND_RAW_DAYS', def: 90, min: 7, max: 3650 },
};

/** What one sender may do to the inbound listener: per connection, and per source address (an IPv6 /64). */
export interface InboundLimits {
  connectionsPerAddress: number;
  messagesPerConnection: number;
  recipientsPerConnection: number;
  messagesPerAddressPerMinute: number;
  recipientsPerAddressPerMinute: number;
}

export class ConfigError extends Error {}

/** The default retry schedule: six delays (1 min, 5 min, 30 min, 2 h, 6 h, 15 h34) summing to 24 h. */
export const DEFAULT_RETRY_DELAYS = [60, 300, 1800, 7200, 21600, 55440];
export const DEFAULT_DISABLE_AFTER_FAILURES = 15;

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, def: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(`${name} must be an integer between ${min} and ${max}, got "${raw}"`);
  const n = Number(raw.trim());
  if (n < min || n > max) throw new ConfigError(`${name} must be an integer between ${min} and ${max}, got "${raw}"`);
  return n;
}

function retentionDays(env: Env, kind: keyof RetentionDays): number {
  const b = RETENTION_BOUNDS[kind];
  return int(env, b.env, b.def, b.min, b.max);
}

function bool(env: Env, name: string, def: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  if (/^(true|1|yes)$/i.test(raw)) return true;
  if (/^(false|0|no)$/i.test(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

function price(env: Env, name: string): number | null {
  const raw = env[name];
  if (raw === undefined || raw === '') return null;
  if (!/^\d+(\.\d+)?$/.test(raw.trim())) throw new ConfigError(`${name} must be a number of cents per million tokens (>= 0), got "${raw}"`);
  return Number(raw.trim());
}

function url(env: Env, name: string, protocols: string[]): string | null {
  const raw = env[name];
  if (raw === undefined || raw === '') return null;
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be a URL, got "${raw}"`);
  }
  if (!protocols.includes(u.protocol)) throw new ConfigError(`${name} must use ${protocols.join(' or ')}, got "${u.protocol}"`);
  return raw;
}

/** A domain name of two labels or more (letters, digits, hyphens), lowercased. */
function domain(env: Env, name: string): string | null {
  const raw = env[name];
  if (raw === undefined || raw === '') return null;
  const d = raw.trim().toLowerCase().replace(/\.$/, '');
  if (d.length > 253 || !/^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]([a-z0-9-]{0,61}[a-z0-9])?$/.test(d)) {
    throw new ConfigError(`${name} must be a domain name such as replies.example.com, got "${raw}"`);
  }
  return d;
}

/** DNS servers: comma-separated `address[:port]`, IPv6 as `[address]:port` (or bare); null when unset. */
function dnsServers(env: Env, name: string): string[] | null {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return null;
  const servers = raw
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
  for (const x of servers) {
    const m = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(x) ?? /^([^:]+)(?::(\d{1,5}))?$/.exec(x);
    const ok = m ? isIP(m[1]) !== 0 && (m[2] === undefined || (Number(m[2]) >= 1 && Number(m[2]) <= 65535)) : isIP(x) === 6;
    if (!ok) throw new ConfigError(`${name} must list DNS servers as address:port (IPv6 as [address]:port), got "${x}"`);
  }
  return servers;
}

export function loadConfig(env: Env = process.env): Config {
  const port = int(env, 'PORT', 3000, 0, 65535);
  const delaysRaw = env.WEBHOOK_RETRY_DELAYS_SECONDS;
  let delays = DEFAULT_RETRY_DELAYS;
  if (delaysRaw !== undefined && delaysRaw !== '') {
    const parts = delaysRaw.split(',').map((s) => s.trim());
    if (parts.length !== 6 || parts.some((p) => !/^\d+$/.test(p))) {
      throw new ConfigError(
        `WEBHOOK_RETRY_DELAYS_SECONDS must be six comma-separated whole seconds (delays before attempts 2..7), got "${delaysRaw}"`,
      );
    }
    delays = parts.map(Number);
  }
  const publicBaseUrl = (url(env, 'PUBLIC_BASE_URL', ['http:', 'https:']) ?? `http://localhost:${port}`).replace(/\/+$/, '');
  const adminToken = env.ADMIN_TOKEN && env.ADMIN_TOKEN.length > 0 ? env.ADMIN_TOKEN : null;
  if (adminToken !== null && adminToken.length < 16) throw new ConfigError('ADMIN_TOKEN must be at least 16 characters');
  const metricsToken = env.METRICS_TOKEN && env.METRICS_TOKEN.length > 0 ? env.METRICS_TOKEN : null;
  if (metricsToken !== null && metricsToken.length < 16) throw new ConfigError('METRICS_TOKEN must be at least 16 characters');
  const logLevel = env.LOG_LEVEL || 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "${logLevel}"`);
  }
  const webhookSecretKey = env.WEBHOOK_SECRET_KEY || null;
  if (webhookSecretKey !== null && !/^[0-9a-f]{64}$/i.test(webhookSecretKey)) {
    throw new ConfigError('WEBHOOK_SECRET_KEY must be 64 hex characters (a 256-bit key)');
  }
  const template = env.RESEARCH_SITE_URL_TEMPLATE || 'https://{domain}';
  if (!template.includes('{domain}')) throw new ConfigError(`RESEARCH_SITE_URL_TEMPLATE must contain {domain}, got "${template}"`);
  url({ RESEARCH_SITE_URL_TEMPLATE: template.replaceAll('{domain}', 'example.com') }, 'RESEARCH_SITE_URL_TEMPLATE', ['http:', 'https:']);
  const allowedTargets = (env.RESEARCH_ALLOWED_TARGETS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const t of allowedTargets) {
    if (!/^(\d{1,3}(\.\d{1,3}){3}|\[[0-9a-f:.]+\]):\d{1,5}$/i.test(t)) {
      throw new ConfigError(`RESEARCH_ALLOWED_TARGETS must list address:port pairs (IPv6 as [addr]:port), got "${t}"`);
    }
  }
  const mailFromRaw = env.MAIL_FROM || 'Outbound <outbound@localhost>';
  const mf = /^\s*(?:"?([^"<]*?)"?\s*<([^<>\s]+@[^<>\s]+)>|([^<>\s]+@[^<>\s]+))\s*$/.exec(mailFromRaw);
  if (!mf) throw new ConfigError(`MAIL_FROM must be an address or "Name <address>", got "${mailFromRaw}"`);
  const llmBaseUrl = url(env, 'LLM_BASE_URL', ['http:', 'https:']);
  const llmModel = env.LLM_MODEL?.trim() || null;
  // Loopback by default: a fresh service (generated operator token, no TLS) is reachable from
  // this machine only until the operator opens it with HOST=0.0.0.0 (containers, a proxy elsewhere).
  const host = env.HOST?.trim() || '127.0.0.1';
  if (isIP(host) === 0 && host !== 'localhost') throw new ConfigError(`HOST must be an IP address (or localhost), got "${host}"`);
  const inboundHost = env.INBOUND_SMTP_HOST?.trim() || '0.0.0.0';
  if (isIP(inboundHost) === 0 && inboundHost !== 'localhost')
    throw new ConfigError(`INBOUND_SMTP_HOST must be an IP address (or localhost), got "${inboundHost}"`);
  if (llmBaseUrl && !llmModel) throw new ConfigError('LLM_MODEL must name the model when LLM_BASE_URL is set');
  return {
    port,
    host,
    databaseUrl: url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']),
    dataDir: env.DATA_DIR || '.data',
    adminToken,
    publicBaseUrl,
    allowInsecureLinks: bool(env, 'ALLOW_INSECURE_LINKS', false),
    erasureHashSecret: env.ERASURE_HASH_SECRET || null,
    rateLimitPerMinute: int(env, 'RATE_LIMIT_PER_MINUTE', 60, 1, 10_000_000),
    webhookAllowPrivateTargets: bool(env, 'WEBHOOK_ALLOW_PRIVATE_TARGETS', false),
    webhookRetryDelaysSeconds: delays,
    webhookDisableAfterFailures: int(env, 'WEBHOOK_DISABLE_AFTER_FAILURES', DEFAULT_DISABLE_AFTER_FAILURES, 1, 1_000_000),
    webhookTimeoutMs: int(env, 'WEBHOOK_TIMEOUT_MS', 10_000, 100, 600_000),
    webhookSecretKey,
    smtpUrl: url(env, 'SMTP_URL', ['smtp:', 'smtps:']),
    smtpTimeoutMs: int(env, 'SMTP_TIMEOUT_MS', 30_000, 100, 600_000),
    smtpMaxConnections: int(env, 'SMTP_MAX_CONNECTIONS', 5, 1, 100),
    smtpThrottleBackoffMs: int(env, 'SMTP_THROTTLE_BACKOFF_MS', 60_000, 1_000, 3_600_000),
    mailFrom: { name: mf[1]?.trim() || null, address: (mf[2] ?? mf[3]).toLowerCase() },
    logLevel,
    researchSiteUrlTemplate: template.replace(/\/+$/, ''),
    researchAllowPrivateTargets: bool(env, 'RESEARCH_ALLOW_PRIVATE_TARGETS', false),
    researchAllowedTargets: new Set(allowedTargets.map((t) => t.toLowerCase())),
    researchRequestTimeoutMs: int(env, 'RESEARCH_REQUEST_TIMEOUT_MS', 8000, 100, 30_000),
    researchMaxPageBytes: int(env, 'RESEARCH_MAX_PAGE_BYTES', 2 * 1024 * 1024, 16 * 1024, 50 * 1024 * 1024),
    llmBaseUrl,
    llmApiKey: env.LLM_API_KEY || null,
    llmModel,
    llmConcurrency: int(env, 'LLM_CONCURRENCY', 4, 1, 256),
    llmTimeoutMs: int(env, 'LLM_TIMEOUT_MS', 30_000, 100, 600_000),
    llmMaxRetries: int(env, 'LLM_MAX_RETRIES', 2, 0, 10),
    llmPriceInputCentsPerMtok: price(env, 'LLM_PRICE_INPUT_CENTS_PER_MTOK'),
    llmPriceOutputCentsPerMtok: price(env, 'LLM_PRICE_OUTPUT_CENTS_PER_MTOK'),
    trustProxy: bool(env, 'TRUST_PROXY', false),
    leadCaptureRateLimit: int(env, 'LEAD_CAPTURE_RATE_LIMIT', 20, 1, 1_000_000),
    inboundSmtpPort:
      env.INBOUND_SMTP_PORT === undefined || env.INBOUND_SMTP_PORT === '' ? null : int(env, 'INBOUND_SMTP_PORT', 0, 0, 65535),
    inboundSmtpHost: inboundHost,
    inboundReplyDomain: domain(env, 'INBOUND_REPLY_DOMAIN'),
    inboundMaxMessageBytes: int(env, 'INBOUND_MAX_MESSAGE_BYTES', 10 * 1024 * 1024, 1024, 100 * 1024 * 1024),
    inboundDnsServers: dnsServers(env, 'INBOUND_DNS_SERVERS'),
    inboundLimits: {
      connectionsPerAddress: int(env, 'INBOUND_MAX_CONNECTIONS_PER_ADDRESS', 10, 1, 1_000_000),
      messagesPerConnection: int(env, 'INBOUND_MAX_MESSAGES_PER_CONNECTION', 20, 1, 1_000_000),
      recipientsPerConnection: int(env, 'INBOUND_MAX_RECIPIENTS_PER_CONNECTION', 100, 1, 1_000_000),
      messagesPerAddressPerMinute: int(env, 'INBOUND_MAX_MESSAGES_PER_ADDRESS_PER_MINUTE', 60, 1, 10_000_000),
      recipientsPerAddressPerMinute: int(env, 'INBOUND_MAX_RECIPIENTS_PER_ADDRESS_PER_MINUTE', 200, 1, 10_000_000),
    },
    runWorker: bool(env, 'RUN_WORKER', true),
    metricsToken,
    retention: {
      events: retentionDays(env, 'events'),
      webhookDeliveries: retentionDays(env, 'webhookDeliveries'),
      sendBodies: retentionDays(env, 'sendBodies'),
      inboundRaw: retentionDays(env, 'inboundRaw'),
    },
  };
}
