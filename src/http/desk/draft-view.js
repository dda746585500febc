// One draft: its subject and body with each cited sentence marked and linked to its source (title,
// snippet, URL beside it; unresolved citations marked), its flags and advisories in words, and the
// decisions: edit in place, regenerate, approve (with an acknowledgement when flagged), reject with
// a reason, send. Every decision goes through the public API and the draft is read again after it.
import { api } from './api.js';
import { anchor, fill, h, link, when } from './dom.js';
import { advisoryWords, DECIDABLE, FLAG_KINDS, holdWords, STATUSES } from './words.js';

/**
 * The body as text nodes, with each citation's sentence wrapped in a mark that links to its source.
 * Sentences are found by their text (the API gives them verbatim); one not found is listed only.
 */
function citedBody(body, citations) {
  const spans = [];
  citations.forEach((c, i) => {
    if (!c.text) return;
    let from = 0;
    for (;;) {
      const at = body.indexOf(c.text, from);
      if (at < 0) return;
      const end = at + c.text.length;
      if (!spans.some((s) => at < s.end && end > s.start)) {
        spans.push({ start: at, end, i, c });
        return;
      }
      from = at + 1;
    }
  });
  spans.sort((a, b) => a.start - b.start);
  const out = [];
  let pos = 0;
  for (const s of spans) {
    out.push(body.slice(pos, s.start));
    const n = s.i + 1;
    out.push(
      h(
        'mark',
        { class: s.c.resolved ? 'cited' : 'cited unresolved', id: `cited-${n}` },
        body.slice(s.start, s.end),
        h('sup', {}, anchor(`source-${n}`, `[${n}${s.c.resolved ? '' : ', unresolved'}]`)),
      ),
    );
    pos = s.end;
  }
  out.push(body.slice(pos));
  return h('div', { class: 'body', id: 'draft-body' }, out);
}

function sources(citations) {
  if (citations.length === 0) return h('p', { class: 'hint' }, 'No cited sentences in this draft.');
  return h(
    'ol',
    { class: 'sources' },
    citations.map((c, i) =>
      h(
        'li',
        { id: `source-${i + 1}` },
        h('q', {}, c.text),
        c.resolved
          ? [
              h(
                'div',
                {},
                h('strong', {}, c.sourceTitle || c.sourceDomain || 'Untitled source'),
                c.sourceDomain ? ` (${c.sourceDomain})` : '',
              ),
              c.sourceSnippet ? h('blockquote', {}, c.sourceSnippet) : null,
              c.sourceUrl ? h('div', {}, link(c.sourceUrl)) : null,
            ]
          : h(
              'div',
              {},
              h('span', { class: 'badge unresolved' }, 'Unresolved'),
              ' The contact’s research was run again after this draft was written, so this source can no longer be looked up.',
            ),
      ),
    ),
  );
}

function findings(d) {
  const g = d.guardrailReport;
  const out = [];
  if (!g) {
    out.push(h('p', { class: 'hint' }, 'No guardrail report was recorded for this draft (which does not mean it is clean).'));
    return out;
  }
  out.push(
    h(
      'p',
      { class: 'meta' },
      g.clean ? 'Guardrails: clean' : 'Guardrails: findings below',
      ` · ${g.attempts} attempt${g.attempts === 1 ? '' : 's'}`,
      g.repaired.length ? ` · repaired: ${g.repaired.join(', ')}` : '',
      d.provider ? ` · written by ${d.provider === 'fallback' ? 'the template fallback (no language model)' : d.provider}` : '',
    ),
  );
  if (g.flags?.length) {
    out.push(
      h('h3', {}, `Flags (${g.flags.length}) — approval needs your acknowledgement`),
      h(
        'ul',
        { class: 'flags' },
        g.flags.map((f) =>
          h(
            'li',
            {},
            h('span', { class: 'badge flagged' }, f.kind),
            ' ',
            FLAG_KINDS[f.kind] ?? '',
            h('div', {}, h('q', {}, f.sentence)),
            f.claims?.length ? h('div', { class: 'meta' }, `Nothing supports: ${f.claims.join('; ')}`) : null,
          ),
        ),
      ),
    );
  }
  if (g.advisories?.length) {
    out.push(
      h('h3', {}, 'Advisories'),
      h(
        'ul',
        { class: 'advisories' },
        g.advisories.map((a) => h('li', {}, h('code', {}, a), ' — ', advisoryWords(a))),
      ),
    );
  }
  return out;
}

/**
 * Renders draft `d` (read with include=evidence) into `root`; `ctx` gives `say(text, isError)`,
 * `replaced(oldId, draft)` (the queue row now shows a new version or state) and `open(id)`.
 */
export function renderDraft(root, d, ctx) {
  const decidable = DECIDABLE.has(d.status) && !d.supersededAt;
  const panel = h('div', { id: 'decision-panel' });
  const act = async (what, fn) => {
    try {
      const result = await fn();
      ctx.say(what);
      return result;
    } catch (e) {
      ctx.say(`${what} failed: ${e.message}`, true);
      return null;
    }
  };
  const reread = async (id, what, fn) => {
    const r = await act(what, fn);
    if (r !== null) await ctx.open(id, true);
  };

  const showApprove = () => {
    if (!d.flagged) return reread(d.id, 'Approved.', () => api('POST', `/drafts/${d.id}/approve`));
    const ack = h('input', { type: 'checkbox', id: 'ack-flags' });
    panel.replaceChildren(
      h(
        'form',
        {
          class: 'panel',
          'aria-label': 'Approve a flagged draft',
          onsubmit: (e) => {
            e.preventDefault();
            if (!ack.checked) return ctx.say('Tick the acknowledgement to approve a flagged draft.', true);
            reread(d.id, 'Approved with the flags acknowledged.', () => api('POST', `/drafts/${d.id}/approve`, { acknowledgeFlags: true }));
          },
        },
        h('p', {}, `This draft carries ${d.guardrailReport?.flags?.length ?? 'some'} flag(s), listed below. Approving sends it as it is.`),
        h('label', {}, ack, ' I have read the flags and approve this draft anyway'),
        ' ',
        h('button', { type: 'submit', id: 'approve-ack' }, 'Approve with acknowledgement'),
      ),
    );
    ack.focus();
  };
  const showReject = () => {
    const reason = h('input', { type: 'text', id: 'reject-reason', class: 'wide', maxlength: 1000, autocomplete: 'off' });
    panel.replaceChildren(
      h(
        'form',
        {
          class: 'panel',
          'aria-label': 'Reject the draft',
          onsubmit: (e) => {
            e.preventDefault();
            const why = reason.value.trim();
            reread(d.id, 'Rejected.', () => api('POST', `/drafts/${d.id}/reject`, why ? { reason: why } : undefined));
          },
        },
        h('label', { for: 'reject-reason' }, 'Reason (shown on the draft)'),
        reason,
        h('button', { type: 'submit', id: 'reject-confirm' }, 'Reject'),
      ),
    );
    reason.focus();
  };
  const showEdit = () => {
    const subject = h('input', { type: 'text', id: 'edit-subject', class: 'wide', maxlength: 200 });
    subject.value = d.subject;
    const body = h('textarea', { id: 'edit-body' });
    body.value = d.body;
    panel.replaceChildren(
      h(
        'form',
        {
          class: 'panel',
          'aria-label': 'Edit the draft',
          onsubmit: async (e) => {
            e.preventDefault();
            const change = {};
            if (subject.value !== d.subject) change.subject = subject.value;
            if (body.value !== d.body) change.body = body.value;
            if (!Object.keys(change).length) return panel.replaceChildren();
            const next = await act('Saved as an edited version; the guardrails ran again.', () => api('PATCH', `/drafts/${d.id}`, change));
            if (next) {
              ctx.replaced(d.id, next);
              await ctx.open(next.id, true);
            }
          },
        },
        h('label', { for: 'edit-subject' }, 'Subject'),
        subject,
        h('label', { for: 'edit-body' }, 'Body'),
        body,
        h('button', { type: 'submit', id: 'edit-save' }, 'Save as a new version'),
        ' ',
        h('button', { type: 'button', onclick: () => panel.replaceChildren() }, 'Cancel'),
      ),
    );
    body.focus();
  };
  const showRegenerate = () => {
    const instructions = h('input', { type: 'text', id: 'regen-instructions', class: 'wide', maxlength: 1000, autocomplete: 'off' });
    panel.replaceChildren(
      h(
        'form',
        {
          class: 'panel',
          'aria-label': 'Regenerate the draft',
          onsubmit: async (e) => {
            e.preventDefault();
            const why = instructions.value.trim();
            const next = await act('Regenerated as a new version.', () =>
              api('POST', `/drafts/${d.id}/regenerate`, why ? { instructions: why } : undefined),
            );
            if (next) {
              ctx.replaced(d.id, next);
              await ctx.open(next.id, true);
            }
          },
        },
        h('label', { for: 'regen-instructions' }, 'What should change (optional; counts against the month’s allowance)'),
        instructions,
        h('button', { type: 'submit', id: 'regen-confirm' }, 'Regenerate'),
      ),
    );
    instructions.focus();
  };
  const send = async () => {
    const r = await act('Send requested.', () => api('POST', `/drafts/${d.id}/send`));
    if (r) ctx.say(r.queued ? `Queued to send (${r.queuedJobCount} step(s)).` : `Not queued: ${r.skippedReason ?? 'nothing to send'}.`);
    if (r) await ctx.open(d.id, true, true);
  };

  const citations = d.citations ?? [];
  fill(
    root,
    h(
      'div',
      { class: 'meta' },
      h('strong', {}, d.contactName),
      ` · step ${d.step} · version ${d.version} · `,
      h('span', { id: 'draft-status' }, STATUSES[d.status] ?? d.status),
      d.flagged ? [' · ', h('span', { class: 'badge flagged' }, 'Flagged')] : null,
      d.unresolvedCitationCount
        ? [' · ', h('span', { class: 'badge unresolved' }, `${d.unresolvedCitationCount} unresolved citation(s)`)]
        : null,
      d.supersededAt ? ' · superseded by a newer version' : null,
    ),
    d.rejectionReason ? h('p', { class: 'error' }, `Rejected: ${d.rejectionReason}`) : null,
    h('p', { class: 'subject-line', id: 'draft-subject' }, d.subject),
    citedBody(d.body, citations),
    h(
      'div',
      { class: 'actions' },
      h('button', { type: 'button', id: 'act-edit', onclick: showEdit, disabled: !decidable && d.status !== 'REJECTED' }, 'Edit'),
      h(
        'button',
        { type: 'button', id: 'act-regenerate', onclick: showRegenerate, disabled: d.status === 'APPROVED' || !!d.sentAt },
        'Regenerate',
      ),
      h('button', { type: 'button', id: 'act-approve', onclick: showApprove, disabled: !decidable }, d.flagged ? 'Approve…' : 'Approve'),
      h('button', { type: 'button', id: 'act-reject', onclick: showReject, disabled: !decidable }, 'Reject…'),
      h('button', { type: 'button', id: 'act-send', onclick: send, disabled: d.status !== 'APPROVED' || !!d.sentAt }, 'Send'),
    ),
    panel,
    h(
      'p',
      { class: 'meta' },
      `Scheduled ${when(d.scheduledAt)} · sent ${when(d.sentAt)} · `,
      `hold: ${holdWords(d.holdReason)}`,
      d.nextAttemptAt ? ` · next attempt ${when(d.nextAttemptAt)}` : '',
    ),
    h('h3', {}, `Sources (${citations.length})`),
    sources(citations),
    findings(d),
  );
  return { approve: () => decidable && showApprove(), reject: () => decidable && showReject() };
}
