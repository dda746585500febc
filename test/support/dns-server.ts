// A DNS server on loopback holding the records a test gives it (TXT for SPF, DKIM and DMARC, A),
// over UDP and, for an answer too large for a datagram, TCP (the truncation bit sends c-ares there),
// encoded with dns-packet. A name it holds nothing for is NXDOMAIN; a name held with other types
// answers no data. `silent` makes a server that reads every query and answers none (a DNS outage).
import dgram from 'node:dgram';
import net from 'node:net';
import dnsPacket from 'dns-packet';

export interface DnsServer {
  /** `127.0.0.1:<port>`, for INBOUND_DNS_SERVERS. */
  address: string;
  /** Sets the records of a name and type (replacing any); TXT values longer than 255 bytes are split into strings. */
  set(name: string, type: 'TXT' | 'A', values: string[]): void;
  /** The questions asked so far, `<name> <type>`. */
  queries: string[];
  close(): Promise<void>;
}

const UDP_MAX = 512;
const TC = 1 << 9;
const AA = 1 << 10;
const RD = 1 << 8;
const NXDOMAIN = 3;

const chunks = (s: string) => (s.match(/[\s\S]{1,255}/g) ?? ['']).map((c) => Buffer.from(c));

export async function startDnsServer(opts: { silent?: boolean } = {}): Promise<DnsServer> {
  const records = new Map<string, { type: 'TXT' | 'A'; values: string[] }[]>();
  const queries: string[] = [];

  /** The answer to a query (the question recorded); null for a silent server or a query it cannot read. */
  function answer(query: Buffer): Buffer | null {
    let q: dnsPacket.Packet;
    try {
      q = dnsPacket.decode(query);
    } catch {
      return null;
    }
    const question = q.questions?.[0];
    if (!question) return null;
    const name = question.name.toLowerCase().replace(/\.$/, '');
    queries.push(`${name} ${question.type}`);
    if (opts.silent) return null;
    const held = records.get(name);
    const answers: dnsPacket.Answer[] = (held ?? [])
      .filter((r) => r.type === question.type)
      .flatMap((r) =>
        r.values.map(
          (v) =>
            (r.type === 'TXT'
              ? { type: 'TXT', name: question.name, ttl: 60, class: 'IN', data: chunks(v) }
              : { type: 'A', name: question.name, ttl: 60, class: 'IN', data: v }) as dnsPacket.Answer,
        ),
      );
    return dnsPacket.encode({
      type: 'response',
      id: q.id,
      flags: AA | ((q.flags ?? 0) & RD) | (held ? 0 : NXDOMAIN),
      questions: q.questions,
      answers,
    });
  }

  const udp = dgram.createSocket('udp4');
  udp.on('message', (msg, rinfo) => {
    let out = answer(msg);
    if (!out) return;
    if (out.length > UDP_MAX) {
      // Too large for a datagram: the header alone with the truncation bit, so the client asks over TCP.
      const q = dnsPacket.decode(msg);
      out = dnsPacket.encode({ type: 'response', id: q.id, flags: AA | TC | ((q.flags ?? 0) & RD), questions: q.questions });
    }
    udp.send(out, rinfo.port, rinfo.address);
  });
  await new Promise<void>((r) => udp.bind(0, '127.0.0.1', () => r()));
  const port = udp.address().port;
  const sockets = new Set<net.Socket>();
  const tcp = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buf = Buffer.alloc(0);
    socket.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        const len = buf.readUInt16BE(0);
        const out = answer(buf.subarray(2, 2 + len));
        buf = buf.subarray(2 + len);
        if (out) socket.write(Buffer.concat([Buffer.from([out.length >> 8, out.length & 0xff]), out]));
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    tcp.once('error', reject);
    tcp.listen(port, '127.0.0.1', () => resolve());
  });
  return {
    address: `127.0.0.1:${port}`,
    set(name, type, values) {
      const key = name.toLowerCase().replace(/\.$/, '');
      const list = (records.get(key) ?? []).filter((r) => r.type !== type);
      records.set(key, [...list, { type, values }]);
    },
    queries,
    close: async () => {
      for (const s of sockets) s.destroy();
      await Promise.all([new Promise<void>((r) => udp.close(() => r())), new Promise<void>((r) => tcp.close(() => r()))]);
    },
  };
}
