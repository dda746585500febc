// The guardrails against their labelled evaluation set (test/fixtures/guardrails/eval-set.json):
// prints precision and recall of the flags (by kind of flag per sentence, and by sentence) and
// every misjudged sentence. Targets: precision and recall both at least 95%. The held-out sets
// (held-out.json, held-out-2.json, held-out-3.json, held-out-4.json) were each written after the
// rules were frozen and measured blind before any rule learned from them (docs/performance.md
// keeps the blind figures); each is held to the floor it reaches now, so no change of the rules
// loses ground on them.
import { describe, expect, it } from 'vitest';
import { describeScore, HELD_OUT_SETS, loadEvalSet, scoreSet } from './support/guardrails-eval.js';

const TARGET = 0.95;

describe('guardrails evaluation', () => {
  it('flags the evaluation set with precision and recall of at least 95%', () => {
    const set = loadEvalSet('eval-set');
    expect(set.items.length).toBeGreaterThanOrEqual(200);
    const score = scoreSet(set);
    console.log(describeScore('evaluation set', score));
    expect(score.precision).toBeGreaterThanOrEqual(TARGET);
    expect(score.recall).toBeGreaterThanOrEqual(TARGET);
  });

  // Floors: 95% where the rules reach it; held-out-4 (blind: precision 87.8%, recall 79.6%) stands
  // at 98.1% / 94.4% after general fixes, below the 95% recall target, and is held to that.
  const FLOORS = {
    'held-out': { precision: TARGET, recall: TARGET },
    'held-out-2': { precision: TARGET, recall: TARGET },
    'held-out-3': { precision: TARGET, recall: TARGET },
    'held-out-4': { precision: 0.98, recall: 0.94 },
  } as const;

  it('holds each held-out set to its floor', () => {
    for (const name of HELD_OUT_SETS) {
      const score = scoreSet(loadEvalSet(name));
      console.log(describeScore(name, score));
      expect(score.items).toBeGreaterThanOrEqual(50);
      expect(score.precision, `${name} precision`).toBeGreaterThanOrEqual(FLOORS[name].precision);
      expect(score.recall, `${name} recall`).toBeGreaterThanOrEqual(FLOORS[name].recall);
    }
  });
});
