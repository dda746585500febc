// Plans and what they entitle. `free` is not entitled to outbound (list generation, sending).
export const PLANS = {
  free: { draftsPerMonth: 50, outbound: false },
  starter: { draftsPerMonth: 1000, outbound: true },
  growth: { draftsPerMonth: 10000, outbound: true },
} as const;

export type PlanId = keyof typeof PLANS;

export const isPlan = (p: string): p is PlanId => Object.hasOwn(PLANS, p);
export const outboundEntitled = (plan: string): boolean => isPlan(plan) && PLANS[plan].outbound;
export const draftsPerMonth = (plan: string): number => (isPlan(plan) ? PLANS[plan].draftsPerMonth : 0);
