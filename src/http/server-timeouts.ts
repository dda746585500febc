// Timeouts of the HTTP server, the same for `npm start` and the tests' servers. Node ends a request
// whose body has not fully arrived after requestTimeout (300 s by default) with a bare 408. The CSV
// import reads its body as it files the rows (up to 64 MiB, about a million rows), so receiving the
// body takes as long as the import: an hour lets the largest import finish on a slow machine. Every
// other body is at most 1 MiB, counted as it arrives; the headers still have their 60 s.
import type { Server } from 'node:http';

export const REQUEST_TIMEOUT_MS = 60 * 60 * 1000;

export function applyServerTimeouts(server: Pick<Server, 'requestTimeout'>): void {
  server.requestTimeout = REQUEST_TIMEOUT_MS;
}
