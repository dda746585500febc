// The guardrails against their labelled evaluation set (test/fixtures/guardrails/eval-set.json):
// prints precision and recall of the flags (by kind of flag per sentence, and by sentence) and
// every misjudged sentence. Targets: precision and recall both at least 95%.
import { describe, expect, it } from 'vitest';
import { describeScore, loadEvalSet, scoreSet } from './support/guardrails-eval.js';

describe('guardrails evaluation', () => {
  it('prints precision and recall of the flags over the evaluation set', () => {
    const set = loadEvalSet('eval-set');
    expect(set.items.length).toBeGreaterThanOrEqual(200);
    const score = scoreSet(set);
    console.log(describeScore('evaluation set', score));
    expect(score.items).toBe(set.items.length);
  });
});
