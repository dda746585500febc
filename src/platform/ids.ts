import crypto from 'node:crypto';

/** Opaque ids: a short type prefix and 96 random bits, e.g. `con_3f9a0c...`. */
export function newId(prefix: string): string {
  return `${prefix}_${crypto.randomBytes(12).toString('hex')}`;
}

export const iso = (d: Date | string | null | undefined): string | null =>
  d === null || d === undefined ? null : (d instanceof Date ? d : new Date(d)).toISOString();

/** Like iso() for columns that are never null. */
export const isoNN = (d: Date | string): string => (d instanceof Date ? d : new Date(d)).toISOString();

const DAY_MS = 86_400_000;
const PAD2 = Array.from({ length: 100 }, (_, i) => String(i).padStart(2, '0'));
const PAD3 = Array.from({ length: 1000 }, (_, i) => String(i).padStart(3, '0'));
let cachedDay = Number.NaN;
let cachedDate = '';

/**
 * Date.prototype.toISOString of epoch milliseconds. List pages format several timestamps per row
 * (a profiled sixth of a page's own work on the API node went to building Dates for this), and
 * the rows of a page mostly share a day: the date part is kept while it stays the same, the time
 * of day is written from tables. Anything but a whole millisecond in 1970-9999 takes the Date path.
 */
function isoOfMs(ms: number): string {
  if (!Number.isInteger(ms)) return new Date(ms).toISOString();
  const day = Math.floor(ms / DAY_MS);
  if (day !== cachedDay) {
    if (!(ms >= 0 && ms < 253_402_300_800_000)) return new Date(ms).toISOString();
    cachedDay = day;
    cachedDate = new Date(day * DAY_MS).toISOString().slice(0, 11);
  }
  let t = ms - day * DAY_MS;
  const h = Math.floor(t / 3_600_000);
  t -= h * 3_600_000;
  const m = Math.floor(t / 60_000);
  t -= m * 60_000;
  const s = Math.floor(t / 1000);
  return `${cachedDate}${PAD2[h]}:${PAD2[m]}:${PAD2[s]}.${PAD3[t - s * 1000]}Z`;
}

/** ISO date-time of epoch milliseconds (see epochMs in db/database.ts). */
export const msIso = (ms: number | null): string | null => (ms === null ? null : isoOfMs(ms));

/** msIso as JSON text: the quoted date-time (which needs no escaping), or null. */
export const msJson = (ms: number | null): string => (ms === null ? 'null' : `"${isoOfMs(ms)}"`);
