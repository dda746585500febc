// Reading a request body within a limit, for every route that reads one whole (JSON bodies, lead
// form submissions, one-click unsubscribes): bytes are counted as they arrive, with or without a
// Content-Length, and reading stops at the limit, so a body sent chunked holds at most the limit in
// memory and the refusal goes out while the client is still sending. What remains unread is
// drained and dropped after the answer by @hono/node-server (a bounded amount, then the connection
// is closed). A body read as a stream (the CSV import) counts its own bytes likewise.

/** The body's bytes, or null when it is larger than `limit` bytes (the rest is not read). */
export async function readBody(req: Request, limit: number): Promise<Buffer | null> {
  const reader = req.body?.getReader();
  if (!reader) return Buffer.alloc(0);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return Buffer.concat(chunks, size);
    size += value.byteLength;
    if (size > limit) {
      reader.cancel().catch(() => {});
      return null;
    }
    chunks.push(value);
  }
}
