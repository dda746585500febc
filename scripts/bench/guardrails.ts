// Guardrails bench: precision and recall of the draft guardrails' flags over the labelled
// evaluation set (test/fixtures/guardrails/eval-set.json), by kind of flag per sentence (target:
// both >= 95%), and over the held-out sets, each written after the rules were frozen and measured
// blind before any rule learned from it (figures only: docs/performance.md keeps the blind ones).
// Runs in this process; the service is not involved.
import { describeScore, HELD_OUT_SETS, loadEvalSet, percent, scoreSet } from '../../test/support/guardrails-eval.js';
import type { BenchArea, BenchContext } from './types.js';

const area: BenchArea = {
  name: 'guardrails: precision and recall of the draft flags over the labelled sentences',
  async run(ctx: BenchContext) {
    for (const name of ['eval-set', ...HELD_OUT_SETS] as const) {
      const s = scoreSet(loadEvalSet(name));
      ctx.log(describeScore(name, s).split('\n')[0]);
      const target = name === 'eval-set';
      ctx.report({
        area: 'guardrails',
        case: `flags over the ${target ? 'evaluation set' : `${name} set`} (${s.items} sentences)`,
        figures: { precision: percent(s.precision), recall: percent(s.recall), wrong: s.falsePositives, missed: s.falseNegatives },
        ...(target ? { target: 'precision >= 95% and recall >= 95%', met: s.precision >= 0.95 && s.recall >= 0.95 } : {}),
      });
    }
  },
};

export default area;
