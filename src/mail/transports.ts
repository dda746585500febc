// The transports of a process: the deployment's (SMTP_URL, else capture) and one pooled SMTP
// transport per mailbox URL, made on first use and kept.
import type { Config } from '../platform/config.js';
import type { SecretBox } from '../platform/secret-box.js';
import { captureTransport, smtpTransport, type Transport } from './transport.js';

export interface Transports {
  deployment: Transport;
  /** The transport of a mailbox: its own SMTP URL (sealed at rest), else the deployment's. */
  forMailbox(smtpUrlSealed: string | null): Transport | null;
  close(): void;
}

export function createTransports(
  config: Pick<Config, 'smtpUrl' | 'smtpTimeoutMs' | 'smtpMaxConnections'>,
  secretBox: SecretBox,
): Transports {
  const opts = { timeoutMs: config.smtpTimeoutMs, maxConnections: config.smtpMaxConnections };
  const deployment = config.smtpUrl ? smtpTransport(config.smtpUrl, opts) : captureTransport();
  const own = new Map<string, Transport>();
  return {
    deployment,
    forMailbox(sealed) {
      if (sealed === null) return deployment;
      const url = secretBox.open(sealed);
      if (url === null) return null; // the key changed: the mailbox must be set up again
      let t = own.get(url);
      if (!t) {
        t = smtpTransport(url, opts);
        own.set(url, t);
      }
      return t;
    },
    close() {
      deployment.close();
      for (const t of own.values()) t.close();
    },
  };
}
