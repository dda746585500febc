import pino from 'pino';

// Structured JSON lines. Authorization headers, keys, secrets and bodies are never logged: only
// the fields the request middleware picks are written.
export function createLogger(level: string) {
  return pino({
    level,
    base: { service: 'outbound' },
    redact: { paths: ['*.authorization', '*.key', '*.secret', '*.signingSecret', '*.body'], censor: '[redacted]' },
  });
}
