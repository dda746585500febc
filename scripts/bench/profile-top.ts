// Summarizes a V8 CPU profile (node --cpu-prof; `BENCH_CPU_PROF_DIR=<dir> npm run bench <area>`):
// the functions with the most self time, and the share of time by package.
//   npx tsx scripts/bench/profile-top.ts <file.cpuprofile> [top=30]
import fs from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

const [file, topArg] = process.argv.slice(2);
const prof = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const self = new Map<number, number>();
for (const [i, id] of prof.samples.entries()) self.set(id, (self.get(id) ?? 0) + (prof.timeDeltas[i] ?? 0));
const total = [...self.values()].reduce((a, b) => a + b, 0);

const where = (url: string) => {
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1];
  if (url.includes('/src/') || url.includes('/handlers/') || url.includes('/db/'))
    return `ours:${url.replace(/^.*\/(src|handlers|db)\//, '$1/')}`;
  return url ? url.replace(/^node:/, 'node:') : '(native/gc/idle)';
};
const fnKey = (n: Node) => `${n.callFrame.functionName || '(anonymous)'} ${where(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`;
const fns = new Map<string, number>();
const pkgs = new Map<string, number>();
for (const [id, t] of self) {
  const n = byId.get(id)!;
  fns.set(fnKey(n), (fns.get(fnKey(n)) ?? 0) + t);
  const p = n.callFrame.functionName === '(idle)' ? '(idle)' : where(n.callFrame.url).replace(/^ours:([^/]+).*$/, 'ours:$1');
  pkgs.set(p, (pkgs.get(p) ?? 0) + t);
}
const pct = (t: number) => `${((t / total) * 100).toFixed(1)}%`.padStart(6);
console.log(`total ${(total / 1e6).toFixed(1)} s sampled`);
console.log('\nself time by package:');
for (const [k, t] of [...pkgs].sort((a, b) => b[1] - a[1]).slice(0, 20)) console.log(`${pct(t)}  ${k}`);
console.log('\ntop functions by self time:');
for (const [k, t] of [...fns].sort((a, b) => b[1] - a[1]).slice(0, Number(topArg ?? 30))) console.log(`${pct(t)}  ${k}`);

// Inclusive time of named functions (self plus callees), e.g. the stages of a request.
const parent = new Map<number, number>();
for (const n of prof.nodes as (Node & { children?: number[] })[]) for (const c of n.children ?? []) parent.set(c, n.id);
const incl = new Map<string, number>();
for (const [id, t] of self) {
  const seen = new Set<string>();
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const k = fnKey(byId.get(cur)!);
    if (!seen.has(k)) {
      seen.add(k);
      incl.set(k, (incl.get(k) ?? 0) + t);
    }
  }
}
const busy = total - (pkgs.get('(idle)') ?? 0);
console.log(`\ntop functions by inclusive time (share of busy time ${(busy / 1e6).toFixed(1)} s):`);
for (const [k, t] of [...incl]
  .filter(([k]) => !k.startsWith('('))
  .sort((a, b) => b[1] - a[1])
  .slice(0, Number(topArg ?? 30))) {
  console.log(`${`${((t / busy) * 100).toFixed(1)}%`.padStart(6)}  ${k}`);
}
