// The OpenAPI documents as the service serves them: their server is the deployment's own address
// (PUBLIC_BASE_URL and the API's path), so a client generated from a running service points at it.
import type { Config } from '../platform/config.js';
import type { OpenApiDoc } from '../platform/openapi-doc.js';

/**
 * The document's JSON with `servers[0].url` set to the base URL followed by apiPath. The base URL is
 * read at each request (a service on PORT=0 learns its own after the app is built); the JSON is
 * rebuilt only when it changes.
 */
export function servedDocument(doc: OpenApiDoc, apiPath: string, config: Pick<Config, 'publicBaseUrl'>): () => string {
  let cached: { base: string; body: string } | undefined;
  return () => {
    const base = config.publicBaseUrl;
    if (cached?.base !== base) {
      const [first, ...rest] = (doc.servers as Record<string, unknown>[] | undefined) ?? [];
      cached = { base, body: JSON.stringify({ ...doc, servers: [{ ...first, url: `${base}${apiPath}` }, ...rest] }) };
    }
    return cached.body;
  };
}
