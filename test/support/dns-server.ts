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

  let udp = dgram.createSocket('udp4');
  const onDatagram = (msg: Buffer, rinfo: dgram.RemoteInfo) => {
    let out = answer(msg);
    if (!out) return;
    if (out.length > UDP_MAX) {
      // Too large for a datagram: the header alone with the truncation bit, so the client asks over TCP.
      const q = dnsPacket.decode(msg);
      out = dnsPacket.encode({ type: 'response', id: q.id, flags: AA | TC | ((q.flags ?? 0) & RD), questions: q.questions });
    }
    udp.send(out, rinfo.port, rinfo.address);
  };
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
  // UDP and TCP on one port: the UDP socket takes a free port, and TCP the same number, which
  // another process may hold already (each port is free for one protocol only): then both again.
  let port = 0;
  for (let attempt = 1; ; attempt += 1) {
    if (attempt > 1) udp = dgram.createSocket('udp4');
    udp.on('message', onDatagram);
    await new Promise<void>((r) => udp.bind(0, '127.0.0.1', () => r()));
    port = udp.address().port;
    const listened = await new Promise<boolean>((resolve, reject) => {
      const fail = (e: NodeJS.ErrnoException) => (e.code === 'EADDRINUSE' && attempt < 20 ? resolve(false) : reject(e));
      tcp.once('error', fail);
      tcp.listen(port, '127.0.0.1', () => {
        tcp.off('error', fail);
        resolve(true);
      });
    });
    if (listened) break;
    tcp.close(() => {}); // as Node's documentation does before listening again after EADDRINUSE
    await new Promise<void>((r) => udp.close(() => r()));
  }
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
