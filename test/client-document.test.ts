// The bundled documents as client generators read them: shapes they name and type well.
import { describe, expect, it } from 'vitest';
import { HTTP_METHODS } from '../src/platform/openapi-doc.js';
import { adminDoc, publicDoc } from '../src/platform/spec.js';

type Node = Record<string, unknown>;

/** Every schema-like object of a document with its JSON pointer. */
function* walk(node: unknown, at = '#'): Generator<[string, Node]> {
  if (!node || typeof node !== 'object') return;
  if (Array.isArray(node)) {
    for (const [i, n] of node.entries()) yield* walk(n, `${at}/${i}`);
    return;
  }
  yield [at, node as Node];
  for (const [k, v] of Object.entries(node)) yield* walk(v, `${at}/${k}`);
}

function operations(doc: object): [string, Node][] {
  const out: [string, Node][] = [];
  for (const [p, item] of Object.entries((doc as { paths: Record<string, Node> }).paths))
    for (const m of HTTP_METHODS) if (item[m]) out.push([`${m} ${p}`, item[m] as Node]);
  return out;
}

describe('the documents as client generators read them', () => {
  it('writes a nullable object or enum as a oneOf of a named schema and {type: null}, never type [object, null] or enum [.., null]', () => {
    for (const doc of [publicDoc, adminDoc]) {
      const bad: string[] = [];
      for (const [at, n] of walk(doc)) {
        if (Array.isArray(n.type) && n.type.includes('null') && (n.type.includes('object') || n.type.includes('array'))) bad.push(at);
        if (Array.isArray(n.enum) && n.enum.includes(null)) bad.push(at);
      }
      expect(bad).toEqual([]);
    }
  });

  it('names every JSON request body and 2xx answer of the public document, pages as <Item>Page, and defines each enum once', () => {
    const inline: string[] = [];
    for (const [name, op] of operations(publicDoc)) {
      const body = (op.requestBody as Node | undefined)?.content as Record<string, Node> | undefined;
      if (body?.['application/json'] && !(body['application/json'].schema as Node).$ref) inline.push(`${name} body`);
      for (const [status, r] of Object.entries(op.responses as Record<string, Node>)) {
        const json = (r.content as Record<string, Node> | undefined)?.['application/json'];
        if (status.startsWith('2') && json && !(json.schema as Node).$ref) inline.push(`${name} ${status}`);
      }
    }
    expect(inline).toEqual([]);
    const schemas = publicDoc.components?.schemas as Record<string, Node>;
    for (const page of ['ContactPage', 'CompanyPage', 'DealPage', 'DraftListItemPage', 'MessagePage'])
      expect(schemas[page]?.required, page).toEqual(['data', 'nextCursor']);
    const qualification = [...walk(publicDoc)].filter(([, n]) => Array.isArray(n.enum) && n.enum.includes('UNQUALIFIED'));
    expect(qualification.map(([at]) => at)).toEqual(['#/components/schemas/QualificationStatus']);
  });

  it('tells unions apart without if/then/else or anyOf: the action body on `action`, the change-stage body and the GET /suppression answers by their keys', () => {
    for (const doc of [publicDoc, adminDoc])
      expect([...walk(doc)].filter(([, n]) => 'if' in n || 'anyOf' in n).map(([at]) => at)).not.toContainEqual(
        expect.stringMatching(/ActionDispatchRequest|ChangeDealStage|GetSuppressionResponse/),
      );
    const schemas = publicDoc.components?.schemas as Record<string, Node>;
    const action = schemas.ActionDispatchRequest;
    expect(action.discriminator).toMatchObject({ propertyName: 'action' });
    const names = (schemas.ActionDispatchName.enum as string[]).sort();
    expect(Object.keys((action.discriminator as { mapping: object }).mapping).sort()).toEqual(names);
    for (const branch of action.oneOf as Node[]) {
      const target = schemas[String(branch.$ref).split('/').pop()!];
      expect(target.additionalProperties, String(branch.$ref)).toBe(false);
    }
    for (const name of ['ChangeDealStageRequest', 'GetSuppressionResponse']) {
      const branches = (schemas[name].oneOf as Node[]).map((b) => schemas[String(b.$ref).split('/').pop()!]);
      expect(branches.map((b) => b.additionalProperties)).toEqual([false, false]);
    }
  });

  it('bounds and types every input: int64 cents, maxItems on event types, a contact, additionalProperties: false beside unevaluatedProperties: false on flat bodies', () => {
    const pub = publicDoc.components?.schemas as Record<string, Node>;
    for (const body of ['CreateDealRequest', 'UpdateDealRequest'])
      expect((pub[body].properties as Record<string, Node>).valueCents).toMatchObject({ format: 'int64', maximum: 1e13 });
    expect(pub.WebhookEventTypes.maxItems).toBe((pub.EventType.enum as string[]).length);
    const impact = (adminDoc.paths as Record<string, Node>)['/organizations/{orgId}/action-items'];
    const body = ((((impact.post as Node).requestBody as Node).content as Record<string, Node>)['application/json'].schema as Node)
      .properties as Record<string, Node>;
    expect(body.expectedImpactCents).toMatchObject({ format: 'int64', maximum: Number.MAX_SAFE_INTEGER });
    for (const doc of [publicDoc, adminDoc]) {
      expect((doc.info as Node).contact, String((doc.info as Node).title)).toMatchObject({ name: expect.any(String) });
      const loose = [...walk(doc)]
        .filter(([, n]) => n.unevaluatedProperties === false && !['allOf', 'oneOf', 'anyOf', 'if', '$ref', 'not'].some((k) => k in n))
        .filter(([, n]) => n.additionalProperties !== false);
      expect(loose.map(([at]) => at)).toEqual([]);
    }
  });
});
