import crypto from 'node:crypto';

/** Opaque ids: a short type prefix and 96 random bits, e.g. `con_3f9a0c...`. */
export function newId(prefix: string): string {
  return `${prefix}_${crypto.randomBytes(12).toString('hex')}`;
}

export const iso = (d: Date | string | null | undefined): string | null =>
  d === null || d === undefined ? null : (d instanceof Date ? d : new Date(d)).toISOString();

/** Like iso() for columns that are never null. */
export const isoNN = (d: Date | string): string => (d instanceof Date ? d : new Date(d)).toISOString();

/** ISO date-time of epoch milliseconds (see epochMs in db/database.ts). */
export const msIso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** msIso as JSON text: the quoted date-time, or null. */
export const msJson = (ms: number | null): string => JSON.stringify(msIso(ms));
