// What model tokens cost, in cents per million tokens (input, output): OpenAI's published list
// prices for a few common models; LLM_PRICE_INPUT_CENTS_PER_MTOK and
// LLM_PRICE_OUTPUT_CENTS_PER_MTOK override them (and price any other model). A model with no
// price (a self-hosted one) costs nothing.
import type { Config } from '../platform/config.js';

const PRICES: Array<[prefix: string, input: number, output: number]> = [
  ['gpt-4o-mini', 15, 60],
  ['gpt-4o', 250, 1000],
  ['gpt-4.1-nano', 10, 40],
  ['gpt-4.1-mini', 40, 160],
  ['gpt-4.1', 200, 800],
];

/** The price of a model: the longest known prefix of its id (dated snapshots share their family's price). */
export function priceOf(
  model: string,
  config: Pick<Config, 'llmPriceInputCentsPerMtok' | 'llmPriceOutputCentsPerMtok'>,
): { input: number; output: number } {
  const known = PRICES.filter(([p]) => model === p || model.startsWith(`${p}-`)).sort((a, b) => b[0].length - a[0].length)[0];
  return {
    input: config.llmPriceInputCentsPerMtok ?? known?.[1] ?? 0,
    output: config.llmPriceOutputCentsPerMtok ?? known?.[2] ?? 0,
  };
}

export function costCents(
  model: string,
  promptTokens: number,
  completionTokens: number,
  config: Pick<Config, 'llmPriceInputCentsPerMtok' | 'llmPriceOutputCentsPerMtok'>,
): number {
  const p = priceOf(model, config);
  return (promptTokens * p.input + completionTokens * p.output) / 1_000_000;
}
