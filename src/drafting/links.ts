// Which links a model-written draft may carry: those of the template (the sender's own words),
// those on the sender's own domains (its mailboxes' and their DKIM domains), and those on the
// prospect's own site (its company domain, and the site root research reads). Any other link a
// model writes (one a hostile source talked it into, or one it made up) is removed with the
// sentence that carries it, with an advisory: a sentence built around a link means nothing
// without it. A link is what linkifyjs finds, the library the message composer (src/mail/message.ts)
// turns text into links with, so what is checked here is what would become clickable and tracked.
import * as linkify from 'linkifyjs';
import type { Tx } from '../../db/database.js';
import { collapse, sentences } from '../platform/text.js';
import { siteRoot } from '../research/crawl.js';

export interface LinkPolicy {
  /** Domains the sender sends from (lower case): a link on one of them, or a subdomain, is the sender's. */
  senderDomains: readonly string[];
  /** The prospect's company domain (lower case), or null. */
  prospectDomain: string | null;
  /** The prospect's site root as research reads it (RESEARCH_SITE_URL_TEMPLATE), or null. */
  prospectSite: string | null;
}

/** The organization's own sending domains: its mailboxes' address domains and DKIM domains. */
export async function senderDomains(trx: Tx, org: string): Promise<string[]> {
  const rows = await trx.selectFrom('mailboxes').select(['email', 'dkim_domain']).where('organization_id', '=', org).execute();
  const domains = rows.flatMap((r) => [r.email.split('@')[1], r.dkim_domain]).filter((d): d is string => typeof d === 'string' && d !== '');
  return [...new Set(domains.map((d) => d.toLowerCase().replace(/\.$/, '')))];
}

/** The links a draft for a prospect at `prospectDomain` may carry besides its template's. */
export function linkPolicy(sender: readonly string[], siteUrlTemplate: string, prospectDomain: string | null): LinkPolicy {
  const domain = prospectDomain?.toLowerCase().replace(/\.$/, '') || null;
  let site: string | null = null;
  if (domain) {
    const root = siteRoot(siteUrlTemplate, domain);
    site = `${root.origin}${root.pathname.replace(/\/+$/, '')}`;
  }
  return { senderDomains: sender, prospectDomain: domain, prospectSite: site };
}

interface Found {
  type: string;
  value: string;
  href: string;
  start: number;
  end: number;
}

const find = (text: string): Found[] => linkify.find(text).filter((l) => l.type === 'url' || l.type === 'email');
const bare = (href: string) => href.replace(/\/+$/, '').toLowerCase();

function hostOf(l: Found): string | null {
  if (l.type === 'email') return l.value.split('@')[1]?.toLowerCase().replace(/\.$/, '') ?? null;
  try {
    return new URL(l.href).hostname.toLowerCase().replace(/\.$/, '');
  } catch {
    return null;
  }
}

const within = (host: string, domain: string) => host === domain || host.endsWith(`.${domain}`);

/** Whether a link is the template's, the sender's or the prospect's. */
function allowed(l: Found, templateLinks: ReadonlySet<string>, policy: LinkPolicy | undefined): boolean {
  if (templateLinks.has(bare(l.href))) return true;
  if (!policy) return false;
  const host = hostOf(l);
  if (host !== null && [...policy.senderDomains, ...(policy.prospectDomain ? [policy.prospectDomain] : [])].some((d) => within(host, d)))
    return true;
  if (l.type === 'url' && policy.prospectSite) {
    const site = policy.prospectSite.toLowerCase();
    const href = l.href.toLowerCase();
    return href === site || href.startsWith(`${site}/`) || href.startsWith(`${site}?`);
  }
  return false;
}

export interface LinkCheck {
  subject: string;
  body: string;
  /** The links removed (as written). */
  removed: string[];
  advisories: string[];
}

/**
 * The draft without links other than the template's, the sender's and the prospect's: a body
 * sentence carrying one is removed (a line left empty goes too), a subject carrying one is
 * replaced by the template's subject. `policy` undefined allows the template's links only.
 */
export function withoutForeignLinks(
  draft: { subject: string; body: string },
  template: { subject: string; body: string },
  policy: LinkPolicy | undefined,
): LinkCheck {
  const templateLinks = new Set(find(`${template.subject}\n${template.body}`).map((l) => bare(l.href)));
  const foreign = (text: string) => find(text).filter((l) => !allowed(l, templateLinks, policy));
  const removed: string[] = [];
  let subject = draft.subject;
  const inSubject = foreign(subject);
  if (inSubject.length > 0) {
    removed.push(...inSubject.map((l) => l.value));
    subject = template.subject;
  }
  const lines: string[] = [];
  for (const line of draft.body.split('\n')) {
    const links = find(line);
    const bad = links.map((l) => !allowed(l, templateLinks, policy));
    if (!bad.includes(true)) {
      lines.push(line);
      continue;
    }
    removed.push(...links.filter((_, i) => bad[i]).map((l) => l.value));
    // Each link stands in as one opaque token while the line is cut into sentences, so a "?" or
    // "." inside a URL never ends a sentence there.
    let masked = line;
    for (let i = links.length - 1; i >= 0; i -= 1)
      masked = `${masked.slice(0, links[i].start)}\ue000${i}\ue001${masked.slice(links[i].end)}`;
    const kept = sentences(masked)
      .filter((s) => !links.some((_, i) => bad[i] && s.includes(`\ue000${i}\ue001`)))
      .join(' ')
      .replace(/\ue000(\d+)\ue001/g, (_, i: string) => links[Number(i)].value);
    if (collapse(kept) !== '') lines.push(kept);
  }
  const body = lines
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
  const unique = [...new Set(removed)];
  return {
    subject,
    body,
    removed: unique,
    advisories: unique.map(
      (l) =>
        `foreign-link: ${l} removed with its sentence (a draft links only to its template's links, the sender's domains and the prospect's site)`,
    ),
  };
}
