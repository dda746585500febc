// The listener's abuse bounds (config.inboundLimits; docs/configuration.md): per connection, the
// messages and recipients it may carry; per source address, the connections open at once and the
// messages and recipients of the current minute. A source address is an IPv4 address, or the /64
// of an IPv6 one (a single host commonly holds a whole /64). Counted in this process's memory: a
// process serves the connections it accepted, and a restart forgets at most a minute.
import net from 'node:net';
import { canonicalV6 } from '../net/address.js';
import type { InboundLimits } from '../platform/config.js';

/** Source addresses one window tracks at most; past it, a new one is refused until the window turns. */
const MAX_TRACKED = 100_000;
const MINUTE_MS = 60_000;

/** The source an address counts against: the IPv4 address, or an IPv6 address's /64 (IPv4-mapped read as IPv4). */
export function sourceOf(ip: string): string {
  if (net.isIP(ip) !== 6) return ip;
  const g = canonicalV6(ip).groups;
  if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff) return [g[6] >> 8, g[6] & 0xff, g[7] >> 8, g[7] & 0xff].join('.');
  return `${g
    .slice(0, 4)
    .map((x) => x.toString(16))
    .join(':')}::/64`;
}

/** Counts per source in fixed windows of a minute; the whole map is dropped when the window turns. */
class MinuteCounter {
  private start = 0;
  private counts = new Map<string, number>();
  /** Adds one for the source; returns the count of the current window (Infinity when too many sources are tracked). */
  hit(source: string, now = Date.now()): number {
    if (now - this.start >= MINUTE_MS) {
      this.start = now;
      this.counts.clear();
    }
    const n = this.counts.get(source);
    if (n === undefined && this.counts.size >= MAX_TRACKED) return Number.POSITIVE_INFINITY;
    this.counts.set(source, (n ?? 0) + 1);
    return (n ?? 0) + 1;
  }
}

/** An SMTP answer refusing a command. */
export interface Refusal {
  code: number;
  message: string;
}

const refuse = (code: number, message: string): Refusal => ({ code, message });

/** The bounds of one listener: call the checks at connect, MAIL FROM and RCPT TO, and `closed` when a connection ends. */
export function listenerLimits(limits: InboundLimits) {
  const open = new Map<string, number>();
  /** Connections counted in `open` (a refused one is not), and the recipients each has sent. */
  const conns = new Map<string, { source: string; messages: number; recipients: number }>();
  const messages = new MinuteCounter();
  const recipients = new MinuteCounter();
  return {
    /** A new connection: refused (421, closed) when its source already has its share open. */
    connect(id: string, ip: string): Refusal | null {
      const source = sourceOf(ip);
      const n = open.get(source) ?? 0;
      if (n >= limits.connectionsPerAddress) return refuse(421, '4.7.0 too many connections from your address, try again later');
      open.set(source, n + 1);
      conns.set(id, { source, messages: 0, recipients: 0 });
      return null;
    },
    /** MAIL FROM (each one counts, whether its message is then sent or not). */
    message(id: string): Refusal | null {
      const c = conns.get(id);
      if (!c) return refuse(421, '4.7.0 connection not accepted');
      c.messages += 1;
      if (c.messages > limits.messagesPerConnection)
        return refuse(421, '4.7.0 too many messages on one connection, reconnect to send more');
      if (messages.hit(c.source) > limits.messagesPerAddressPerMinute)
        return refuse(450, '4.7.0 too many messages from your address, try again later');
      return null;
    },
    /** RCPT TO (counted whether or not the recipient is then accepted). */
    recipient(id: string): Refusal | null {
      const c = conns.get(id);
      if (!c) return refuse(421, '4.7.0 connection not accepted');
      c.recipients += 1;
      if (c.recipients > limits.recipientsPerConnection) return refuse(452, '4.5.3 too many recipients on one connection');
      if (recipients.hit(c.source) > limits.recipientsPerAddressPerMinute)
        return refuse(450, '4.7.0 too many recipients from your address, try again later');
      return null;
    },
    closed(id: string): void {
      const c = conns.get(id);
      if (!c) return;
      conns.delete(id);
      const n = (open.get(c.source) ?? 1) - 1;
      if (n > 0) open.set(c.source, n);
      else open.delete(c.source);
    },
  };
}
