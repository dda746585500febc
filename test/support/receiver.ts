// A webhook receiver on loopback for tests: records every request (raw body bytes included) and
// answers with whatever `respond` returns: a status code, or 'hang' to never answer. And a silent
// server, which accepts connections and never answers anything.
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { waitFor } from './harness.js';

export interface Received {
  headers: http.IncomingHttpHeaders;
  raw: Buffer;
  body: Record<string, any> | undefined;
  url: string;
  at: number;
}

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** Waits until at least n requests (matching pred) arrived (20 s unless told); returns them. */
  waitFor(n?: number, pred?: (r: Received) => boolean, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

export type Respond = (r: Received, n: number) => number | 'hang' | Promise<number | 'hang'>;

export async function startReceiver(respond: Respond = () => 200): Promise<Receiver> {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const raw = Buffer.concat(chunks);
      let body: Record<string, any> | undefined;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        body = undefined;
      }
      const entry: Received = { headers: req.headers, raw, body, url: req.url ?? '', at: Date.now() };
      received.push(entry);
      const status = await respond(entry, received.length);
      if (status === 'hang') return;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    received,
    waitFor: (n = 1, pred = () => true, timeoutMs = 20_000) =>
      waitFor(
        async () => {
          const hits = received.filter(pred);
          return hits.length >= n ? hits : null;
        },
        timeoutMs,
        `${n} webhook request(s)`,
      ),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** A TCP server on loopback that accepts every connection and never sends a byte (no HTTP answer, no SMTP greeting). */
export interface SilentServer {
  port: number;
  /** Connections accepted so far. */
  accepted(): number;
  close(): Promise<void>;
}

export async function startSilentServer(): Promise<SilentServer> {
  const sockets = new Set<net.Socket>();
  let accepted = 0;
  const server = net.createServer((socket) => {
    accepted += 1;
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
    socket.resume();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as AddressInfo).port,
    accepted: () => accepted,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}
