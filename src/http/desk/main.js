// The review desk: sign in with a pasted key (GET /me), the queue of drafts (GET /drafts with the
// list, sequence, flagged and status filters, paged), the list's generation run (polled every few
// seconds only while it runs), one draft at a time, batch decisions, and the contact's replies.
// Requests are few and one at a time per panel: opening drafts with j/k waits for the keys to
// settle, and the run is polled by one timer.
import { ApiError, api, onRateLimitWait, query, session } from './api.js';
import { fill, h } from './dom.js';
import { renderDraft } from './draft-view.js';
import { renderReplies } from './replies.js';
import { STATUSES } from './words.js';

const $ = (id) => document.getElementById(id);
const PAGE_SIZE = 25;
const RUN_POLL_MS = 3000;
const OPEN_DELAY_MS = 250;

const state = { drafts: [], nextCursor: null, selected: new Set(), current: -1, view: null, filters: {} };

function say(text, isError = false) {
  const el = $('status');
  el.textContent = text;
  el.className = isError ? 'status error' : 'status';
}
onRateLimitWait((ms) => say(`The API key’s rate limit is reached; waiting ${Math.ceil(ms / 1000)} s before trying again.`));

// --- Sign in -------------------------------------------------------------------------------

async function signIn() {
  try {
    const me = await api('GET', '/me');
    const k = me.apiKey;
    $('who').replaceChildren(
      `${me.organization.name} · key ${k.name ?? k.id}${k.role ? ` (${k.role})` : ''} · scopes: `,
      h('span', { id: 'scopes' }, k.scopes.join(', ')),
    );
    $('signin').hidden = true;
    $('desk').hidden = false;
    $('sign-out').hidden = false;
    await loadLists();
    await loadQueue();
  } catch (e) {
    session.clear();
    $('signin-error').textContent =
      e instanceof ApiError && e.status === 401 ? 'That key was not accepted.' : `Could not sign in: ${e.message}`;
  }
}

$('signin-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const key = $('api-key').value.trim();
  $('api-key').value = '';
  if (!key) return;
  session.set(key);
  $('signin-error').textContent = '';
  signIn();
});
// The button stays disabled until this script handles the form: a form submitted natively would
// put the key in the page's address.
$('signin-submit').disabled = false;
$('sign-out').addEventListener('click', () => {
  session.clear();
  location.reload();
});

// --- Lists and their generation run ------------------------------------------------------

async function loadLists() {
  const lists = await api('GET', `/lists${query({ limit: 100 })}`);
  const select = $('f-list');
  select.replaceChildren(h('option', { value: '' }, 'Any list'), ...lists.data.map((l) => h('option', { value: l.id }, l.name)));
}

let runTimer = null;
async function showRun() {
  clearTimeout(runTimer);
  const listId = state.filters.listId;
  const el = $('run');
  if (!listId) return el.replaceChildren();
  let run;
  try {
    run = (await api('GET', `/lists/${encodeURIComponent(listId)}/generation-runs${query({ limit: 1 })}`)).data[0];
  } catch (e) {
    return el.replaceChildren(h('p', { class: 'error' }, `Generation run: ${e.message}`));
  }
  if (listId !== state.filters.listId) return;
  if (!run) return el.replaceChildren(h('p', { class: 'hint' }, 'No generation run for this list yet.'));
  const active = run.state === 'queued' || run.state === 'running';
  const total = run.draftsToWrite ?? 0;
  fill(
    el,
    h(
      'p',
      { id: 'run-state' },
      `Generation run: ${run.state} · ${run.draftsGenerated}${total ? ` of ${total}` : ''} drafts written`,
      run.draftsFailed ? ` · ${run.draftsFailed} failed` : '',
      ` · chunks ${run.chunksDone}/${run.chunkCount}`,
    ),
    run.chunkCount ? h('progress', { max: run.chunkCount, value: run.chunksDone, 'aria-label': 'Generation progress' }) : null,
  );
  if (active) runTimer = setTimeout(showRun, RUN_POLL_MS);
  // The run just finished: its drafts are read once (the run itself is not read again).
  else if (state.runWasActive) loadQueue(false, false);
  state.runWasActive = active;
}

// --- The queue ------------------------------------------------------------------------------

function readFilters() {
  const f = {
    listId: $('f-list').value,
    sequenceId: $('f-sequence').value.trim(),
    flagged: $('f-flagged').value,
    status: $('f-status').value,
  };
  return f;
}

/**
 * Reads the first page of the queue (or the next, `more`). `refilter`: the filters are read from
 * the form and the list's run is shown again; otherwise the applied filters are kept (a refresh).
 */
async function loadQueue(more = false, refilter = true) {
  if (!more) {
    if (refilter) state.filters = readFilters();
    state.drafts = [];
    state.nextCursor = null;
    state.selected.clear();
    state.current = -1;
    if (refilter) {
      state.runWasActive = false;
      showRun();
    }
  }
  try {
    const page = await api('GET', `/drafts${query({ ...state.filters, limit: PAGE_SIZE, cursor: more ? state.nextCursor : '' })}`);
    state.drafts.push(...page.data);
    state.nextCursor = page.nextCursor;
  } catch (e) {
    say(`Could not read the queue: ${e.message}`, true);
  }
  renderQueue();
}

function renderQueue() {
  const body = $('drafts-body');
  body.replaceChildren(
    ...state.drafts.map((d, i) => {
      const box = h('input', {
        type: 'checkbox',
        class: 'pick',
        'aria-label': `Select the draft to ${d.contactName}`,
        onchange: (e) => {
          if (e.target.checked) state.selected.add(d.id);
          else state.selected.delete(d.id);
          renderBatch();
        },
      });
      box.checked = state.selected.has(d.id);
      return h(
        'tr',
        { 'data-id': d.id, 'aria-current': i === state.current ? 'true' : null },
        h('td', {}, box),
        h(
          'td',
          {},
          h(
            'button',
            { type: 'button', class: 'open-draft', onclick: () => select(i, true) },
            d.contactName,
            h('span', { class: 'subject' }, d.subject),
          ),
        ),
        h('td', {}, `${d.step} · v${d.version}`),
        h('td', { class: 'status-cell' }, STATUSES[d.status] ?? d.status),
        h('td', {}, d.flagged ? h('span', { class: 'badge flagged' }, 'Flagged') : ''),
      );
    }),
  );
  $('queue-empty').hidden = state.drafts.length > 0;
  $('more').hidden = !state.nextCursor;
  renderBatch();
}

$('filters').addEventListener('submit', (e) => {
  e.preventDefault();
  loadQueue();
});
$('more').addEventListener('click', () => loadQueue(true));
$('select-all').addEventListener('change', (e) => {
  for (const d of state.drafts) {
    if (e.target.checked) state.selected.add(d.id);
    else state.selected.delete(d.id);
  }
  renderQueue();
});

/** A draft's row shows a new version or state (after an edit, a regeneration or a decision). */
function replaced(oldId, d) {
  const i = state.drafts.findIndex((x) => x.id === oldId);
  if (i < 0) return;
  state.drafts[i] = { ...state.drafts[i], ...d };
  if (state.selected.delete(oldId)) state.selected.add(d.id);
  renderQueue();
}

// --- One draft ------------------------------------------------------------------------------

let openTimer = null;
let openSeq = 0;

function select(i, now = false) {
  if (i < 0 || i >= state.drafts.length) return;
  state.current = i;
  renderQueue();
  clearTimeout(openTimer);
  const id = state.drafts[i].id;
  if (now) open(id);
  else openTimer = setTimeout(() => open(id), OPEN_DELAY_MS);
}

async function open(id, keepStatus = false, withReplies = true) {
  const mine = ++openSeq;
  if (!keepStatus) say('');
  try {
    const d = await api('GET', `/drafts/${encodeURIComponent(id)}${query({ include: 'evidence' })}`);
    if (mine !== openSeq) return;
    replaced(id, d);
    state.view = renderDraft($('draft-view'), d, { say, replaced, open });
    if (withReplies) await renderReplies($('replies-view'), d);
  } catch (e) {
    say(`Could not open the draft: ${e.message}`, true);
  }
}

// --- Batch ----------------------------------------------------------------------------------

function renderBatch() {
  const n = state.selected.size;
  $('batch-count').textContent = `${n} selected`;
  for (const id of ['batch-approve', 'batch-reject', 'batch-send']) $(id).disabled = n === 0;
}

async function batch(verb) {
  const ids = [...state.selected];
  if (!ids.length) return;
  const ack = $('batch-ack').checked;
  const reason = $('batch-reason').value.trim();
  const items = ids.map((id) => ({
    id,
    ...(verb === 'approve' && ack ? { acknowledgeFlags: true } : {}),
    ...(verb === 'reject' && reason ? { reason } : {}),
  }));
  let r;
  try {
    r = await api('POST', `/drafts/batch/${verb}`, { items }, { idempotent: true });
  } catch (e) {
    return say(`Batch ${verb} failed: ${e.message}`, true);
  }
  const names = new Map(state.drafts.map((d) => [d.id, d.contactName]));
  $('batch-results').replaceChildren(
    h('p', {}, `Batch ${verb}: ${r.succeeded} succeeded, ${r.failed} failed.`),
    h(
      'ul',
      { id: 'batch-items' },
      r.results.map((x) =>
        h(
          'li',
          { class: x.status === 200 ? 'ok' : 'error', 'data-id': x.id, 'data-status': x.status },
          `${names.get(x.id) ?? x.id}: `,
          x.status === 200
            ? verb === 'send' && x.result && x.result.queued === false
              ? `not queued (${x.result.skippedReason ?? 'nothing to send'})`
              : 'done'
            : `${x.status} — ${x.problem?.detail ?? x.problem?.title ?? 'refused'}`,
        ),
      ),
    ),
  );
  say(`Batch ${verb}: ${r.succeeded} succeeded, ${r.failed} failed.`);
  // One read of the queue shows the new states (not one read per item).
  await loadQueue(false, false);
}
$('batch-approve').addEventListener('click', () => batch('approve'));
$('batch-reject').addEventListener('click', () => batch('reject'));
$('batch-send').addEventListener('click', () => batch('send'));

// --- Keyboard -------------------------------------------------------------------------------

document.addEventListener('keydown', (e) => {
  if (e.ctrlKey || e.metaKey || e.altKey || $('desk').hidden) return;
  const t = e.target;
  if (t instanceof HTMLInputElement || t instanceof HTMLTextAreaElement || t instanceof HTMLSelectElement) return;
  if (e.key === 'j') select(Math.min(state.current + 1, state.drafts.length - 1));
  else if (e.key === 'k') select(Math.max(state.current - 1, 0));
  else if (e.key === 'a') state.view?.approve();
  else if (e.key === 'r') state.view?.reject();
  else return;
  e.preventDefault();
});

if (session.get()) signIn();
