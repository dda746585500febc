// The condition language of custom rules: a small JSON tree over the triggering event's data.
//
//   node  := { all: [node, ...] } | { any: [node, ...] } | leaf
//   leaf  := { field: "data.<key>[.<key>...]", equals: scalar }
//          | { field, in: [scalar, ...] } | { field, gte: number } | { field, exists: boolean }
//
// A tree is checked once, when the rule is written (checkConditions), so evaluation never fails:
// a field the event lacks is simply not equal, not in, not >= and not existing.
export type Scalar = string | number | boolean | null;
export type Leaf = { field: string } & ({ equals: Scalar } | { in: Scalar[] } | { gte: number } | { exists: boolean });
export type Condition = { all: Condition[] } | { any: Condition[] } | Leaf;

export const CONDITION_LIMITS = {
  /** Levels of all/any nesting, the root counting as one. */
  maxDepth: 4,
  /** Nodes in the whole tree (all/any and leaves). */
  maxNodes: 32,
  /** Children of one all/any. */
  maxChildren: 16,
  /** Values of one `in`. */
  maxInValues: 50,
  /** Characters of a string value. */
  maxStringChars: 500,
  /** Keys of a field path after `data.`. */
  maxPathKeys: 5,
} as const;

const KEY = /^[A-Za-z0-9_-]{1,64}$/;
const OPERATORS = ['equals', 'in', 'gte', 'exists'] as const;

export interface ConditionError {
  field: string;
  message: string;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function scalarError(v: unknown): string | null {
  if (v === null || typeof v === 'boolean') return null;
  if (typeof v === 'number') return Number.isFinite(v) ? null : 'must be a finite number';
  if (typeof v === 'string')
    return v.length <= CONDITION_LIMITS.maxStringChars ? null : `must be at most ${CONDITION_LIMITS.maxStringChars} characters`;
  return 'must be a string, number, boolean or null';
}

/** The first thing wrong with a condition tree, located by a path such as `conditions.all[1].gte`; null when it is sound. */
export function checkConditions(tree: unknown, at = 'conditions'): ConditionError | null {
  let nodes = 0;
  const walk = (node: unknown, where: string, depth: number): ConditionError | null => {
    nodes += 1;
    if (nodes > CONDITION_LIMITS.maxNodes)
      return { field: where, message: `a condition tree has at most ${CONDITION_LIMITS.maxNodes} nodes` };
    if (!isObject(node)) return { field: where, message: 'must be an object: {all: [...]}, {any: [...]} or {field, <operator>}' };
    const keys = Object.keys(node);
    if (keys.includes('all') || keys.includes('any')) {
      const op = keys.includes('all') ? 'all' : 'any';
      if (keys.length !== 1) return { field: where, message: `${op} stands alone: no other key beside it` };
      if (depth > CONDITION_LIMITS.maxDepth)
        return { field: where, message: `all/any nest at most ${CONDITION_LIMITS.maxDepth} levels deep` };
      const children = node[op];
      if (!Array.isArray(children) || children.length === 0)
        return { field: `${where}.${op}`, message: 'must be a non-empty array of conditions' };
      if (children.length > CONDITION_LIMITS.maxChildren)
        return { field: `${where}.${op}`, message: `holds at most ${CONDITION_LIMITS.maxChildren} conditions` };
      for (let i = 0; i < children.length; i += 1) {
        const e = walk(children[i], `${where}.${op}[${i}]`, depth + 1);
        if (e) return e;
      }
      return null;
    }
    if (!keys.includes('field'))
      return { field: where, message: 'must be {all: [...]}, {any: [...]} or a leaf {field, equals|in|gte|exists}' };
    const extra = keys.filter((k) => k !== 'field' && !(OPERATORS as readonly string[]).includes(k));
    if (extra.length > 0)
      return { field: `${where}.${extra[0]}`, message: `unknown key; a leaf has field and one of ${OPERATORS.join(', ')}` };
    const ops = keys.filter((k) => (OPERATORS as readonly string[]).includes(k));
    if (ops.length !== 1) return { field: where, message: `a leaf has exactly one operator of ${OPERATORS.join(', ')}` };
    const f = node.field;
    if (typeof f !== 'string' || !f.startsWith('data.'))
      return { field: `${where}.field`, message: 'must be a path into the event data, such as data.intent' };
    const path = f.slice('data.'.length).split('.');
    if (path.length > CONDITION_LIMITS.maxPathKeys || !path.every((k) => KEY.test(k))) {
      return {
        field: `${where}.field`,
        message: `must be data. then 1 to ${CONDITION_LIMITS.maxPathKeys} dot-separated keys of letters, digits, _ or -`,
      };
    }
    const op = ops[0];
    const v = node[op];
    if (op === 'equals') {
      const e = scalarError(v);
      return e ? { field: `${where}.equals`, message: e } : null;
    }
    if (op === 'in') {
      if (!Array.isArray(v) || v.length === 0 || v.length > CONDITION_LIMITS.maxInValues)
        return { field: `${where}.in`, message: `must be an array of 1 to ${CONDITION_LIMITS.maxInValues} values` };
      for (let i = 0; i < v.length; i += 1) {
        const e = scalarError(v[i]);
        if (e) return { field: `${where}.in[${i}]`, message: e };
      }
      return null;
    }
    if (op === 'gte')
      return typeof v === 'number' && Number.isFinite(v) ? null : { field: `${where}.gte`, message: 'must be a finite number' };
    return typeof v === 'boolean' ? null : { field: `${where}.exists`, message: 'must be true or false' };
  };
  return walk(tree, at, 1);
}

/** The value at a `data.` path of an event's data; undefined when any key on the way is missing. */
export function valueAt(data: unknown, field: string): unknown {
  let v: unknown = data;
  for (const k of field.slice('data.'.length).split('.')) {
    if (!isObject(v) || !Object.hasOwn(v, k)) return undefined;
    v = v[k];
  }
  return v;
}

/** Whether an event's data satisfies a checked tree (null: every event does). */
export function matches(tree: Condition | null, data: unknown): boolean {
  if (tree === null) return true;
  if ('all' in tree) return tree.all.every((c) => matches(c, data));
  if ('any' in tree) return tree.any.some((c) => matches(c, data));
  const v = valueAt(data, tree.field);
  if ('exists' in tree) return (v !== undefined) === tree.exists;
  if ('gte' in tree) return typeof v === 'number' && v >= tree.gte;
  if ('in' in tree) return v !== undefined && tree.in.some((x) => x === v);
  return v !== undefined && v === tree.equals;
}

/** The distinct field paths a tree reads, in the order it names them. */
export function fieldsRead(tree: Condition | null): string[] {
  if (tree === null) return [];
  if ('all' in tree) return [...new Set(tree.all.flatMap(fieldsRead))];
  if ('any' in tree) return [...new Set(tree.any.flatMap(fieldsRead))];
  return [tree.field];
}
