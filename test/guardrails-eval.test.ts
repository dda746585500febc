// The guardrails against their labelled evaluation set (test/fixtures/guardrails/eval-set.json):
// prints precision and recall of the flags (by kind of flag per sentence, and by sentence) and
// every misjudged sentence. Targets: precision and recall both at least 95%. The held-out sets
// (held-out.json, held-out-2.json, held-out-3.json, held-out-4.json), written after the rules were frozen, are printed to check
// that the rules generalize; they are never tuned against, so they carry no target.
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

  it('prints precision and recall over the held-out sets', () => {
    for (const name of HELD_OUT_SETS) {
      const score = scoreSet(loadEvalSet(name));
      console.log(describeScore(name, score));
      expect(score.items).toBeGreaterThanOrEqual(50);
    }
  });
});
