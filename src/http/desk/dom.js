// Building the page from data: every text goes in as a text node (never parsed as markup), and the
// only links to elsewhere are http(s) URLs opened in a new tab without this page's context
// (rel="noopener noreferrer"); anything else a source names is shown as plain text.

/** An element with attributes (on* keys become listeners) and children (strings become text nodes). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'href' || k === 'src' || k.startsWith('on')) throw new Error(`h() does not set ${k}; use link()`);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
  return el;
}

/** The URL when it is absolute http(s), else null. */
export function safeUrl(value) {
  if (typeof value !== 'string') return null;
  try {
    const u = new URL(value);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : null;
  } catch {
    return null;
  }
}

/** A link that opens in a new tab without this page's context, or plain text for anything not http(s). */
export function link(url, text) {
  const safe = safeUrl(url);
  const label = text ?? url ?? '';
  if (!safe) return h('span', { class: 'not-linked', title: 'Not an http(s) address: shown, not linked' }, String(label));
  const a = h('a', { target: '_blank', rel: 'noopener noreferrer' }, String(label));
  a.href = safe;
  return a;
}

/** A link to a place on this page (an element id). */
export function anchor(id, text) {
  const a = h('a', {}, text);
  a.href = `#${id}`;
  return a;
}

export const when = (iso) => (iso ? new Date(iso).toLocaleString() : '—');

/** Replaces an element's children (strings as text; null, false and nested arrays handled as h() does). */
export function fill(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}
