// Challenge-response mail: a recipient's filter (cPanel BoxTrapper, Spam Arrest, Boxbe, the
// "unknown sender" quarantines of some providers and add-ons) holds our message and asks us to
// prove we are a person, or to get ourselves onto the recipient's approved senders, before it is
// delivered. It often carries no automatic header and comes from the recipient's own address, so
// it is told by its wording: phrases only such a system writes, in English and, where cheap,
// German, French and Spanish, over the subject and the start of the text (folded, see fold.ts).
// Each alternative is a plain phrase with at most one bounded gap: linear on any input.
import { fold } from './fold.js';
import { MAX_RULES_CHARS } from './limits.js';

const MESSAGE = '(?:e-?mail|message|mail)';

const PHRASES: Array<[string, string]> = [
  [
    'verify-human',
    "(?:verify|confirm|prove|show) (?:that )?you(?:'re| are) (?:a )?(?:human|real person|real sender|not a (?:robot|bot|spammer|machine|computer))",
  ],
  [
    'approved-senders',
    `(?:add(?:ed)?|put|place[d]?|include[d]?) (?:you |your (?:${MESSAGE} )?(?:address )?)?(?:to|on|in) (?:my|the|our|his|her) (?:list of )?(?:approved|allowed|trusted|accepted|verified|authori[sz]ed|safe|white|guest) ?(?:senders?(?: list)?|contacts|list)`,
  ],
  [
    'held-for-verification',
    `(?:your|this) ${MESSAGE}(?: to me| to [a-z0-9.@_-]{1,80})? (?:is|has been|was|will be|is being) (?:held|quarantined|placed on hold|put on hold|kept|queued|pending)[^.\\n]{0,80}(?:verif|confirm|approv|authori[sz]|releas)`,
  ],
  [
    'verify-to-deliver',
    `(?:verify|confirm|validate|authenticate) (?:your|this) ${MESSAGE}[^.\\n]{0,60}(?:deliver|receive|reach|releas|inbox|get through)`,
  ],
  ['get-delivered', `(?:to )?(?:get|have) your ${MESSAGE} (?:delivered|released|through)`],
  [
    'challenge-system',
    'challenge[- ]response|spam ?arrest|boxbe|boxtrapper|sender verification (?:system|service|request|required)|(?:my|this) (?:inbox|mailbox|e-?mail(?: address)?) (?:is|uses) (?:protected|guarded|screened|filtered) by',
  ],
  [
    'challenge-de',
    'bestatigen sie,? dass sie (?:ein )?mensch|(?:liste|list) (?:der )?(?:zugelassenen|vertrauenswurdigen|freigegebenen) absender|ihre (?:nachricht|e-?mail) wird (?:erst )?zugestellt,? (?:sobald|wenn|nachdem) sie',
  ],
  [
    'challenge-fr',
    "confirme[rz]? que vous (?:etes|n'etes pas) (?:un |une )?(?:humain|personne|robot)|liste (?:des )?expediteurs (?:autorises|approuves)|votre (?:message|e-?mail|courriel) (?:est|a ete|sera) (?:retenu|mis en attente|en attente)",
  ],
  [
    'challenge-es',
    '(?:confirme|verifique|confirmar|verificar) que (?:usted )?(?:es|eres) (?:un |una )?(?:humano|persona)|lista de remitentes (?:aprobados|autorizados|permitidos)|su (?:mensaje|correo) (?:esta|ha sido|sera) retenido',
  ],
];

const TEXT = new RegExp(PHRASES.map(([, re], i) => `(?<c${i}>(?<![a-z0-9])(?:${re})(?![a-z0-9]))`).join('|'));
/** BoxTrapper's subject carries "verify#<id>"; others ask for verification in the subject. */
const SUBJECT =
  /verify#|^(?:\[[^\]]{0,40}\] ?)?(?:please )?(?:verification|confirmation|sender verification) (?:required|needed|requested|request)|^please (?:verify|confirm) (?:your|that you)/;

/** The challenge-response key of a message's subject and text, or null. */
export function challengeWording(subject: string | null, text: string): string | null {
  if (subject) {
    const s = fold(subject.slice(0, 300)).trim();
    if (SUBJECT.test(s)) return 'verify-subject';
    const m = TEXT.exec(s);
    if (m) return keyOf(m);
  }
  if (!text) return null;
  const m = TEXT.exec(fold(text.slice(0, MAX_RULES_CHARS)));
  return m ? keyOf(m) : null;
}

function keyOf(m: RegExpExecArray): string {
  const groups = m.groups ?? {};
  const i = PHRASES.findIndex((_, k) => groups[`c${k}`] !== undefined);
  return PHRASES[i]?.[0] ?? 'challenge';
}
