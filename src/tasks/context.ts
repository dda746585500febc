/** Task payloads are validated before use; a malformed payload fails the job permanently. */
export function requireFields<T extends Record<string, unknown>>(payload: unknown, fields: (keyof T & string)[]): T {
  if (!payload || typeof payload !== 'object') throw new Error('task payload must be an object');
  for (const f of fields) {
    if (typeof (payload as Record<string, unknown>)[f] !== 'string') throw new Error(`task payload lacks string field ${f}`);
  }
  return payload as T;
}
