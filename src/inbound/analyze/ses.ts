// Amazon SES bounce and delivery notifications mailed through SNS ("AWS Notification Message"):
// a JSON document, sometimes wrapped in an SNS envelope whose "Message" is that JSON as a string.
// Mail transport may have wrapped its long line, so the fields are read one by one rather than by
// parsing the whole document: notificationType, bounce.bounceType, and per bounced (or delivered)
// recipient emailAddress, action, status, diagnosticCode; the original Message-ID from the copied
// headers when SES kept them. Complaint notifications are left to the complaint reader.

export interface SesRecipient {
  recipient: string;
  action: string | null;
  status: string | null;
  diagnostic: string | null;
}

export interface SesNotification {
  kind: 'bounce' | 'delivery';
  /** bounceType Transient: SES will not retry, but the failure was temporary. */
  transient: boolean;
  recipients: SesRecipient[];
  messageId: string | null;
}

/** Characters of a notification read (SES's are a few KB). */
const MAX_JSON_CHARS = 64 * 1024;
const MAX_RECIPIENTS = 50;

const stringField = (obj: string, name: string): string | null => {
  const m = new RegExp(`"${name}"\\s*:\\s*"((?:[^"\\\\]|\\\\.){0,2000})"`).exec(obj);
  return m ? m[1].replace(/\\(.)/g, '$1') : null;
};

/** The notification in a text, or null when the text is none. */
export function sesNotification(text: string): SesNotification | null {
  if (!text.includes('notificationType')) return null;
  // an SNS envelope carries the notification as an escaped string: unescape its quotes; undo line wrapping
  const t = text
    .slice(0, MAX_JSON_CHARS)
    .replace(/\\"/g, '"')
    .replace(/!?\r?\n[ \t]?/g, '');
  const type = stringField(t, 'notificationType');
  if (type !== 'Bounce' && type !== 'Delivery') return null;
  const list =
    type === 'Bounce'
      ? /"bouncedRecipients"\s*:\s*\[([^\]]{0,20000})\]/.exec(t)
      : /"delivery"\s*:\s*\{[\s\S]{0,20000}?"recipients"\s*:\s*\[([^\]]{0,20000})\]/.exec(t);
  const recipients: SesRecipient[] = [];
  if (list) {
    if (type === 'Bounce') {
      for (const obj of list[1].match(/\{[^{}]{0,4000}\}/g) ?? []) {
        const address = stringField(obj, 'emailAddress');
        if (!address?.includes('@')) continue;
        recipients.push({
          recipient: address.trim().toLowerCase(),
          action: stringField(obj, 'action')?.toLowerCase() ?? 'failed',
          status: stringField(obj, 'status'),
          diagnostic: stringField(obj, 'diagnosticCode'),
        });
        if (recipients.length >= MAX_RECIPIENTS) break;
      }
    } else {
      for (const m of list[1].matchAll(/"([^"\s@]{1,64}@[^"\s]{1,253})"/g)) {
        recipients.push({ recipient: m[1].toLowerCase(), action: 'delivered', status: null, diagnostic: stringField(t, 'smtpResponse') });
        if (recipients.length >= MAX_RECIPIENTS) break;
      }
    }
  }
  const header = /\{\s*"name"\s*:\s*"message-id"\s*,\s*"value"\s*:\s*"([^"]{1,1000})"/i.exec(t);
  const common = /"commonHeaders"\s*:\s*\{[^{}]{0,20000}?"messageId"\s*:\s*"([^"]{1,1000})"/.exec(t);
  const id = header?.[1] ?? common?.[1] ?? null;
  const bracketed = id ? /<([^<>\s]{1,900})>/.exec(id) : null;
  return {
    kind: type === 'Bounce' ? 'bounce' : 'delivery',
    transient: stringField(t, 'bounceType') === 'Transient',
    recipients,
    messageId: bracketed ? `<${bracketed[1]}>` : id?.includes('@') ? `<${id.trim()}>` : null,
  };
}
