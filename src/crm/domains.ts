// Company identity rests on the normalized domain: bare domains and URLs reduce to the same
// lower-case ASCII (punycode) host, without scheme, `www.`, port, path or trailing dot.

import { createRequire } from 'node:module';
import { domainToASCII } from 'node:url';

const require = createRequire(import.meta.url);
// A maintained list of free and disposable mail providers (package `freemail`).
const freemail = require('freemail') as { isFree(emailOrDomain: string): boolean };

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

export function normalizeDomain(input: string): string | null {
  let s = input.trim();
  if (s === '' || /\s/.test(s)) return null;
  if (s.includes('@') && !s.includes('/')) s = s.slice(s.lastIndexOf('@') + 1);
  let host: string;
  try {
    host = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(s) ? s : `http://${s}`).hostname;
  } catch {
    return null;
  }
  host = domainToASCII(host.replace(/\.$/, '').toLowerCase());
  if (!host) return null;
  if (host.startsWith('www.')) host = host.slice(4);
  const labels = host.split('.');
  if (labels.length < 2 || host.length > 253 || !labels.every((l) => LABEL.test(l))) return null;
  if (/^\d+$/.test(labels[labels.length - 1])) return null; // an IP address is not a company domain
  return host;
}

export function isFreemailDomain(domain: string): boolean {
  return freemail.isFree(`x@${domain}`);
}

/** Lower-cased, trimmed address: the identity of a contact within a list. */
export const normalizeEmail = (email: string): string => email.trim().toLowerCase();

/** The address with its plus tag removed (`ada+news@x.com` -> `ada@x.com`). */
export function stripPlusTag(email: string): string {
  const e = normalizeEmail(email);
  const at = e.lastIndexOf('@');
  if (at < 0) return e;
  const local = e.slice(0, at);
  const plus = local.indexOf('+');
  return plus < 0 ? e : `${local.slice(0, plus)}@${e.slice(at + 1)}`;
}

export const domainOfEmail = (email: string): string => normalizeEmail(email).split('@').pop() ?? '';
