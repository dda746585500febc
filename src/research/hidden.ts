// Text a page hides from its readers: research keeps text as the page shows it, and hidden text is
// where an attacker puts words for a model to read (a prompt injection no visitor sees). Removed
// before any text is read: elements with the `hidden` attribute, and elements whose inline style,
// or a top-level rule of the page's own <style> sheets, hides them: display:none,
// visibility:hidden, no opacity, tiny or transparent text, text the colour of its background,
// off-screen positions, zero-size clipped boxes (never the page itself: html, body, main). Rules inside @media are left alone (text hidden
// on one screen size is shown on another). A judgement of declarations, not a layout engine:
// what it cannot see (scripts, external sheets) is left to the suspicious-text check.
import type * as cheerio from 'cheerio';

type CheerioAPI = ReturnType<typeof cheerio.load>;

/** The declarations of a style text, property to value (lower case, !important dropped). */
export function declarations(style: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of style.split(';')) {
    const at = part.indexOf(':');
    if (at < 0) continue;
    const prop = part.slice(0, at).trim().toLowerCase();
    const value = part
      .slice(at + 1)
      .replace(/!\s*important/i, '')
      .trim()
      .toLowerCase();
    if (prop && value) out.set(prop, value);
  }
  return out;
}

/** A CSS length in px (em and rem at 16 px), or null when it is not one. */
function px(value: string): number | null {
  const m = /^(-?\d*\.?\d+)(px|pt|em|rem|%|vw|vh)?$/.exec(value.trim());
  if (!m) return null;
  const n = Number(m[1]);
  switch (m[2]) {
    case 'pt':
      return (n * 4) / 3;
    case 'em':
    case 'rem':
      return n * 16;
    case undefined:
    case 'px':
      return n;
    default:
      return null;
  }
}

/** A colour's alpha is zero (transparent, rgba/hsla with 0, #rrggbb00, #rgb0). */
const invisibleColour = (c: string) =>
  c === 'transparent' || /^(rgba|hsla)\(.*[,/]\s*0*(\.0+)?%?\s*\)$/.test(c) || /^#[0-9a-f]{6}00$/.test(c) || /^#[0-9a-f]{3}0$/.test(c);

/** #rgb as #rrggbb, so two spellings of one colour compare equal. */
const colour = (c: string) => (/^#[0-9a-f]{3}$/.test(c) ? `#${[...c.slice(1)].map((x) => x + x).join('')}` : c);

/** Whether declarations hide their element's text from a reader. */
export function hides(d: Map<string, string>): boolean {
  if (d.get('display') === 'none') return true;
  if (/^(hidden|collapse)$/.test(d.get('visibility') ?? '')) return true;
  // No opacity hides, unless it is an entrance animation's first frame (server-rendered
  // animations start at opacity 0 with a transform or transition, and scripts fade them in).
  const opacity = d.get('opacity');
  const animated = d.has('transform') || d.has('transition') || d.has('will-change') || d.has('animation');
  if (opacity !== undefined && !animated && (opacity.endsWith('%') ? Number.parseFloat(opacity) / 100 : Number.parseFloat(opacity)) <= 0.05)
    return true;
  const size = d.get('font-size');
  if (size !== undefined) {
    const n = px(size);
    if ((n !== null && n < 4) || /^0*(\.0+)?(%|vw|vh)?$/.test(size) || (size.endsWith('%') && Number.parseFloat(size) < 25)) return true;
  }
  const fg = d.get('color');
  if (fg !== undefined && invisibleColour(fg)) return true;
  const bg = d.get('background-color') ?? d.get('background');
  if (fg !== undefined && bg !== undefined && colour(fg) === colour(bg)) return true;
  for (const side of ['left', 'top', 'right', 'text-indent', 'margin-left', 'margin-top']) {
    const n = px(d.get(side) ?? '');
    if (n !== null && n <= -500) return true;
  }
  if (/^rect\(\s*0/.test(d.get('clip') ?? '') || /^(inset\(\s*(50|100)%|circle\(\s*0)/.test(d.get('clip-path') ?? '')) return true;
  if (/^scale\(\s*0(\s*[,)]|\.0*\s*[,)])/.test(d.get('transform') ?? '')) return true;
  const zero = (v: string | undefined) => v !== undefined && px(v) === 0;
  if (
    (zero(d.get('width')) || zero(d.get('height')) || zero(d.get('max-height')) || zero(d.get('max-width'))) &&
    d.get('overflow') === 'hidden'
  )
    return true;
  return false;
}

/** The top-level rules of a style sheet: selector list and declarations (comments and at-rules skipped). */
function rules(sheet: string): Array<{ selector: string; body: string }> {
  const text = sheet.replace(/\/\*[\s\S]*?\*\//g, '');
  const out: Array<{ selector: string; body: string }> = [];
  let depth = 0;
  let start = 0;
  let selector = '';
  for (let i = 0; i < text.length; i += 1) {
    const ch = text[i];
    if (ch === '{') {
      if (depth === 0) {
        selector = text.slice(start, i).trim();
        start = i + 1;
      }
      depth += 1;
    } else if (ch === '}' && depth > 0) {
      depth -= 1;
      if (depth === 0) {
        if (selector && !selector.startsWith('@')) out.push({ selector, body: text.slice(start, i) });
        start = i + 1;
      }
    }
  }
  return out;
}

/** Elements never removed: a sheet that hides the whole page (an anti-flicker snippet) hides it only until its script runs. */
const KEPT = new Set(['html', 'head', 'body', 'main']);

/** Removes what the page hides from its readers (before its text is read). */
export function removeHidden($: CheerioAPI): void {
  const hidden: Parameters<CheerioAPI>[0][] = [];
  $('style').each((_, el) => {
    for (const r of rules($(el).text())) {
      if (!hides(declarations(r.body))) continue;
      for (const selector of r.selector.split(',')) {
        // Pseudo-elements and states (::before, :hover) are not elements a reader never sees.
        if (/::|:(hover|focus|active|visited|before|after)/.test(selector)) continue;
        try {
          $(selector.trim()).each((_, x) => {
            hidden.push(x);
          });
        } catch {
          /* a selector the engine does not know hides nothing here */
        }
      }
    }
  });
  $('[hidden], [style]').each((_, el) => {
    if ($(el).is('[hidden]') || hides(declarations($(el).attr('style') ?? ''))) hidden.push(el);
  });
  for (const el of hidden) if (!KEPT.has((el as { name?: string }).name ?? '') && $(el).attr('role') !== 'main') $(el).remove();
}
