// The name of the deal a lead's conversion opens when the client names none.
const DEAL_NAME_MAX = 200;
const SUFFIX = ' (inbound)';

/** The company name, else the person's name, else the address, followed by " (inbound)" (at most 200 characters). */
export function defaultDealName(lead: { company_name: string | null; name: string | null; email: string }): string {
  const base = lead.company_name ?? lead.name ?? lead.email;
  return `${base.slice(0, DEAL_NAME_MAX - SUFFIX.length)}${SUFFIX}`;
}

/** What an erasure renames a deal to whose default name carried the person's name or address. */
export const ERASED_DEAL_NAME = 'Inbound lead (erased)';
