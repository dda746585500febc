// The contact's side: their messages with the classified intent, the open action items about
// them, and the sequence's hold reason and next send time.
import { api, query } from './api.js';
import { fill, h, when } from './dom.js';
import { holdWords, intentWords } from './words.js';

export async function renderReplies(root, draft) {
  const [messages, items, seq] = await Promise.all([
    api('GET', `/messages${query({ contactId: draft.contactId, limit: 20 })}`),
    api('GET', `/action-items${query({ status: 'pending', limit: 100 })}`),
    draft.sequenceId ? api('GET', `/sequences/${encodeURIComponent(draft.sequenceId)}`) : Promise.resolve(null),
  ]);
  const open = items.data.filter((i) => i.entityId === draft.contactId);
  fill(
    root,
    h('h3', {}, 'Sequence'),
    seq
      ? h(
          'p',
          { id: 'sequence-state' },
          `${seq.status} · hold: ${holdWords(seq.holdReason)}`,
          seq.holdReason ? h('code', {}, ` (${seq.holdReason})`) : null,
          ` · next send ${when(seq.nextAttemptAt)}`,
        )
      : h('p', { class: 'hint' }, 'This draft is not part of a sequence.'),
    h('h3', {}, `Messages (${messages.data.length})`),
    messages.data.length
      ? h(
          'ul',
          { class: 'messages', id: 'messages' },
          messages.data.map((m) =>
            h(
              'li',
              {},
              h(
                'div',
                { class: 'meta' },
                m.direction === 'INBOUND' ? 'From the contact' : 'Sent',
                ` · ${when(m.receivedAt ?? m.createdAt)}`,
                m.direction === 'INBOUND'
                  ? [
                      ' · ',
                      h('strong', {}, intentWords(m.intent)),
                      m.intentConfidence != null ? ` (${Math.round(m.intentConfidence * 100)}%)` : '',
                    ]
                  : null,
                m.authenticated ? null : ' · sender not verified',
              ),
              m.subject ? h('div', {}, h('strong', {}, m.subject)) : null,
              h('div', { class: 'text' }, m.text),
            ),
          ),
        )
      : h('p', { class: 'hint' }, 'No messages with this contact.'),
    h('h3', {}, `Open action items (${open.length})`),
    open.length
      ? h(
          'ul',
          { id: 'action-items' },
          open.map((i) =>
            h('li', {}, h('strong', {}, i.title), ` · ${i.priority}`, i.description ? h('div', { class: 'meta' }, i.description) : null),
          ),
        )
      : h('p', { class: 'hint' }, 'None.'),
  );
}
