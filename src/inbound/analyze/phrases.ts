// The phrase rules: what a reply says, in English and, where cheap, German, French, Spanish,
// Italian, Dutch and Portuguese. Each table is compiled once into one regular expression of named
// alternatives (no regex is built per message), run over folded text (fold.ts: no accents,
// lowercase, one space), bounded by MAX_RULES_CHARS. The alternatives are plain phrases with
// optional words and at most one bounded gap: no nested quantifiers, linear on any input.
// A phrase marked negatable does not count when a negation ("not", "no need to", "don't", "kein",
// "pas", …) comes shortly before it in the same clause: "no need to unsubscribe" is not an
// unsubscribe request, "not interested in this" is not interest.
import { fold } from './fold.js';

export interface Phrase {
  key: string;
  re: string;
  negatable?: boolean;
}
export interface PhraseMatch {
  key: string;
  index: number;
  text: string;
}

export class PhraseTable {
  private readonly re: RegExp;
  private readonly phrases: Phrase[];

  constructor(phrases: Phrase[]) {
    this.phrases = phrases;
    // a phrase starts and ends at a word edge (or at punctuation, for links)
    this.re = new RegExp(phrases.map((p, i) => `(?<p${i}>(?<![a-z0-9])(?:${p.re})(?![a-z0-9]))`).join('|'), 'g');
  }

  /** The first phrase found in folded text that is not negated. */
  find(folded: string): PhraseMatch | null {
    const re = this.re; // shared safely: this loop is synchronous, no other call can interleave
    re.lastIndex = 0;
    for (let m = re.exec(folded); m; m = re.exec(folded)) {
      const groups = m.groups ?? {};
      const i = this.phrases.findIndex((_, k) => groups[`p${k}`] !== undefined);
      const phrase = this.phrases[i];
      if (!phrase.negatable || !negated(folded, m.index)) return { key: phrase.key, index: m.index, text: m[0] };
      if (m[0].length === 0) re.lastIndex += 1;
    }
    return null;
  }
}

const NEGATION =
  /(?:^|[^a-z'])(?:not|no|never|nobody|nothing|without|cannot|dont|nicht|kein|keine|keinen|nie|pas|jamais|nunca|nada|non|ni|geen|niet)(?![a-z])|n't(?![a-z])/;
const NEGATION_WINDOW = 30;

/** A negation in the clause just before `index` (clauses end at . ! ? ; , and newlines). */
export function negated(folded: string, index: number): boolean {
  let w = folded.slice(Math.max(0, index - NEGATION_WINDOW), index);
  const cut = Math.max(
    w.lastIndexOf('.'),
    w.lastIndexOf('!'),
    w.lastIndexOf('?'),
    w.lastIndexOf(';'),
    w.lastIndexOf(','),
    w.lastIndexOf('\n'),
    w.lastIndexOf(' but '),
  );
  if (cut >= 0) w = w.slice(cut + 1);
  return NEGATION.test(w);
}

// Absence phrases speak of a present or coming absence ("I am away", "je serai absent"), never a
// past one ("I was on vacation last week" is a person's reply), and are anchored to words a person
// writing back would not use for something else ("nicht erreichbar" alone is also a website).
const I_AM = "(?:i am|i'm|im|i will be|i'll be|i shall be)";
export const OUT_OF_OFFICE = new PhraseTable([
  { key: 'out-of-office', re: 'out[- ]of[- ](?:the )?office' },
  {
    key: 'away',
    re: `${I_AM} (?:currently |presently |now |still )?(?:away|on (?:annual |parental |maternity |paternity |sick |medical |study |holiday |vacation )?leave|on (?:vacation|holiday|holidays|pto|sabbatical|a business trip|business travel)|out until|off until|off work|out sick|off sick|out of the country|travel(?:l)?ing (?:on business|for work|with (?:limited|no|little) access))`,
  },
  { key: 'away', re: `${I_AM} (?:currently )?taking (?:a few |some |a couple of |a )?(?:days?|time|weeks?|break) off` },
  { key: 'limited-access', re: '(?:limited|no|without|restricted|intermittent) access to (?:my )?(?:e-?mails?|inbox)' },
  {
    key: 'reply-on-return',
    re: "(?:will|shall|i'll) (?:respond|reply|get back to you|answer|be in touch|read (?:it|your (?:e-?mail|message)))[^.!?\\n]{0,30} (?:when|upon|after|once|as soon as) (?:i|my) (?:return|get back|am back|come back)",
  },
  {
    key: 'back-on',
    re: "(?:i will|i'll|i shall|and will|and i will|and i'll) be back (?:in the office |in office |at work |at my desk |at the office |in the country )?(?:on|from|by|after|next|in the office|at (?:work|my desk|the office))(?! touch)",
  },
  {
    key: 'back-on',
    re: "(?:returning|i return|i will return|i'll return|i shall return) (?:to the office |to work |to my desk )?(?:on|next) ",
  },
  {
    key: 'ooo-de',
    re: [
      'nicht im (?:buro|buero|haus|office)|ausser haus|abwesend|abwesenheit|im urlaub|in elternzeit|im mutterschutz',
      'keinen zugriff auf (?:meine )?e-?mails|(?:wieder|zuruck|zurueck) (?:im buro|im buero|erreichbar|im haus|fur sie erreichbar|am arbeitsplatz|im einsatz)',
      '(?:ich bin|bin ich) (?:derzeit |aktuell |momentan |zurzeit |leider |bis [^.!?\\n]{1,25} )?(?:nicht|nur eingeschrankt|eingeschrankt) (?:erreichbar|im dienst)',
      '(?:ich bin|bin ich) (?:derzeit |aktuell |momentan |zurzeit )?(?:auf (?:dienstreise|geschaftsreise|reisen)|unterwegs)',
    ].join('|'),
  },
  {
    key: 'ooo-fr',
    re: [
      'absente? du bureau|hors du bureau|en conges?|en vacances|je suis absente?|je serai absente?|en deplacement|en conge (?:maternite|parental|maladie)',
      'de retour (?:le|au bureau|a partir)|je serai de retour|je reviendrai|a mon retour|pendant mon absence|acces limite a (?:mes|ma) (?:e-?mails?|courriels?|messagerie)',
    ].join('|'),
  },
  {
    key: 'ooo-es',
    re: [
      'fuera de la oficina|de vacaciones|estoy ausente|estare ausente|estare (?:de vuelta|fuera)|me encuentro (?:fuera|ausente|de viaje|de permiso)',
      'regresare el|volvere el|a mi regreso|durante mi ausencia|de baja (?:por maternidad|por paternidad|medica)|acceso limitado (?:a|al) (?:mi )?correo',
    ].join('|'),
  },
  {
    key: 'ooo-it',
    re: "fuori (?:sede|ufficio)|in ferie|in vacanza|sono assente|saro assente|assente dall'ufficio|rientrero|rientro (?:in ufficio|il)|al mio rientro|tornero (?:in ufficio|il)|di ritorno il|in congedo|in trasferta|accesso limitato (?:alla posta|alle e-?mail)",
  },
  {
    key: 'ooo-nl',
    re: 'afwezig|afwezigheid|niet op kantoor|buiten kantoor|niet aanwezig|met vakantie|op vakantie|met verlof|ben (?:weer )?terug op|weer (?:aanwezig|bereikbaar|op kantoor)|beperkt bereikbaar',
  },
  {
    key: 'ooo-pt',
    re: 'fora do escritorio|ausente do escritorio|de ferias|em ferias|estou ausente|estarei (?:ausente|fora|de volta)|volto (?:no dia|em|a|na)|regressarei|retornarei|durante a minha ausencia|em licenca|acesso limitado ao (?:e-?mail|correio)',
  },
]);

export const UNSUBSCRIBE = new PhraseTable([
  { key: 'unsubscribe', re: 'unsubscrib(?:e|ed|ing)|un-subscribe', negatable: true },
  { key: 'remove-me', re: 'remove (?:me|us|my (?:e-?mail|address|name|details|contact)|this (?:e-?mail|address))', negatable: true },
  { key: 'take-me-off', re: 'take (?:me|us|my (?:e-?mail|address|name)) off', negatable: true },
  { key: 'stop-emailing', re: 'stop (?:e-?mailing|contacting|messaging|sending|writing|spamming|reaching out)', negatable: true },
  {
    key: 'do-not-contact',
    re: "(?:do not|don't|dont|please never|never) (?:e-?mail|contact|message|write to|reach out to|spam) (?:me|us)",
  },
  { key: 'opt-out', re: 'opt(?: me| us)?[- ]?out', negatable: true },
  { key: 'no-more-emails', re: 'no (?:more|further) (?:e-?mails|messages|contact|outreach)' },
  { key: 'spam-report', re: '(?:report|reported|reporting|mark|marked|marking) (?:you|this|it) (?:as|for) spam' },
  {
    key: 'unsubscribe-de',
    re: 'abmelden|abbestellen|austragen|aus (?:ihrem|dem|eurem) verteiler|keine (?:weiteren )?(?:e-?mails|nachrichten|werbung) mehr|nicht mehr (?:kontaktieren|anschreiben)',
    negatable: true,
  },
  {
    key: 'unsubscribe-fr',
    re: 'desabonner|desinscrire|desinscrivez|desinscription|ne (?:me )?(?:contactez|ecrivez|sollicitez) plus|retirez[- ]moi|supprimez[- ]moi',
  },
  {
    key: 'unsubscribe-es',
    re: 'dar(?:me|nos)? de baja|no me (?:contacte|contactes|escriba|escribas|envie|envies) mas|eliminen? mi (?:correo|direccion)|borrar(?:me)? de (?:su|la|vuestra) lista',
  },
  {
    key: 'unsubscribe-it',
    re: 'cancellami|cancellatemi|disiscrivermi|disiscrizione|non (?:mi )?(?:contattate|scrivete|contatti|scriva) piu',
  },
  { key: 'unsubscribe-nl', re: 'afmelden|uitschrijven|geen (?:e-?mails|berichten) meer' },
]);

export const NOT_INTERESTED = new PhraseTable([
  {
    key: 'not-interested',
    re: 'not (?:really |that |very |particularly |currently |at all |too |even )?interested|(?:no|zero|little) interest',
  },
  { key: 'no-thanks', re: 'no,? thanks?(?: you)?|no thank you' },
  {
    key: 'already-use',
    re: "(?:we|i) (?:already|currently) (?:use|have|work with|are using|pay for)|(?:we're|we are|i'm|i am) already (?:using|working with)",
  },
  {
    key: 'not-a-fit',
    re: 'not (?:a |the )?(?:good |right |great )?fit|not (?:the )?right (?:time|moment)|not a priority|not relevant|not for us|not something (?:we|i) need|no budget|not in (?:the|our) budget',
  },
  { key: 'all-set', re: "(?:we're|we are|i'm|i am) all set|(?:we're|we are) (?:happy|fine|good) with (?:our|the) current" },
  { key: 'pass', re: "(?:we'll|we will|i'll|i will|going to|gonna) pass|pass on this" },
  { key: 'not-looking', re: "(?:we're|we are|i'm|i am) not (?:currently )?looking|(?:don't|do not|doesn't) need (?:this|it|your|any)" },
  {
    key: 'not-interested-de',
    re: 'kein(?:e|en)? (?:interesse|bedarf)|nicht interessiert|(?:haben|nutzen|verwenden) (?:schon|bereits) (?:eine|einen|ein)',
  },
  { key: 'not-interested-fr', re: 'pas interesse|aucun interet|pas (?:de |le )?besoin|non merci' },
  { key: 'not-interested-es', re: 'no (?:me|nos) interesa|no (?:estoy|estamos) interesad[oa]s?|no,? gracias|no necesitamos' },
  { key: 'not-interested-it', re: 'non (?:mi|ci) interessa|non (?:sono|siamo) interessat[oie]|no,? grazie' },
  { key: 'not-interested-nl', re: 'geen interesse|niet geinteresseerd|nee,? bedankt' },
]);

const WEEKDAY = '(?:monday|tuesday|wednesday|thursday|friday|tomorrow)';
export const MEETING_REQUEST = new PhraseTable([
  {
    key: 'set-up-call',
    re: '(?:set up|setup|schedule|book|arrange|organi[sz]e|have|jump on|hop on|get on|do) (?:a |an )?(?:quick |short |brief |first |intro |\\d{1,2}[- ]?min(?:ute)?s? )?(?:call|meeting|chat|demo|zoom|teams call|video call|intro call|discovery call)',
    negatable: true,
  },
  {
    key: 'availability',
    re: '(?:are|r) you (?:free|available|around)|(?:when|what time) (?:are|would) you (?:be )?(?:free|available)|what does your (?:calendar|schedule|week) look like|(?:find|pick|grab|book) (?:a )?(?:time|slot|some time|a few minutes)',
    negatable: true,
  },
  {
    key: 'day-works',
    re: `(?:how about|what about|does|would|is) (?:next )?${WEEKDAY}|(?:${WEEKDAY}|next week)(?: (?:morning|afternoon|evening))? (?:works|work|is good|suits|would work)`,
    negatable: true,
  },
  {
    key: 'invite',
    re: '(?:send|forward) (?:me |us |over )?(?:a |an |the )?(?:calendar |meeting |teams |zoom )?invite|calendar invite|meeting invite',
    negatable: true,
  },
  {
    key: 'lets-talk',
    re: "let'?s (?:talk|chat|speak|connect|meet|jump on|hop on)|happy to (?:talk|chat|meet|jump on|hop on|connect)|(?:can|could|shall) we (?:talk|speak|chat|meet)",
    negatable: true,
  },
  {
    key: 'scheduling-link',
    re: 'calendly\\.com|cal\\.com|savvycal\\.com|meetings\\.hubspot\\.com|calendar\\.app\\.google|calendar\\.google\\.com/calendar/appointments|outlook\\.office(?:365)?\\.com/(?:book[a-z]*|owa/calendar)|zcal\\.co|tidycal\\.com|chilipiper\\.com|youcanbook\\.me|doodle\\.com',
  },
  {
    key: 'meeting-de',
    re: 'termin (?:vereinbaren|ausmachen|finden|machen|vorschlagen)|(?:telefonat|gesprach|call) (?:vereinbaren|machen|fuhren)|haben sie (?:am|nachste woche|diese woche) zeit|lass(?:en)? uns (?:telefonieren|sprechen|reden)',
    negatable: true,
  },
  {
    key: 'meeting-fr',
    re: '(?:prendre|fixer|caler|planifier) (?:un )?(?:rendez-vous|rdv|appel|creneau)|etes-vous disponible',
    negatable: true,
  },
  {
    key: 'meeting-es',
    re: '(?:agendar|programar|organizar|tener) (?:una )?(?:llamada|reunion|videollamada)|(?:tienes|tiene|tienen) tiempo',
    negatable: true,
  },
]);

export const INTERESTED = new PhraseTable([
  {
    key: 'sounds-interesting',
    re: '(?:sounds|sound|looks|look|seems|seem) (?:very |really |quite |pretty )?(?:interesting|intriguing|promising|great|good|relevant|useful)',
    negatable: true,
  },
  {
    key: 'tell-me-more',
    re: 'tell (?:me|us) more|(?:love|like|keen|happy|curious) to (?:learn|hear|know|see|understand) more|(?:learn|hear|know) more about|more (?:info|information|details) (?:on|about|please)',
    negatable: true,
  },
  {
    key: 'interested',
    re: "(?:i'm|i am|we're|we are|i'd be|we'd be|i would be|we would be) (?:very |definitely |quite |really |potentially |certainly |also )?interested|interested in (?:learning|hearing|seeing|a demo|this|your|the|how|more|trying)|(?:still|very|definitely|really|yes,?|also) interested",
    negatable: true,
  },
  // "Interested." or "Interested, tell me more" as a sentence of its own
  { key: 'interested', re: '(?:^|(?<=[.!?] ))interested(?= ?[.!,;:]|$)', negatable: true },
  {
    key: 'send-info',
    re: 'send (?:me |us |over |through )*(?:some |more |a few |the |your |a |an )?(?:info|information|details|pricing|prices|price list|quote|proposal|deck|case stud(?:y|ies)|one[- ]pager|brochure|materials?)',
    negatable: true,
  },
  {
    key: 'pricing',
    re: "(?:what|how much) (?:does|do|is|would|will) (?:it|this|that|your(?: [a-z]+){0,2}) cost|what(?:'s| is| are) (?:the |your )?(?:pricing|price|prices|cost)|how (?:does|do) (?:the |your )?pricing work",
  },
  {
    key: 'open-to',
    re: 'open to (?:learning|hearing|exploring|a conversation|it|the idea)|keen to (?:explore|learn|hear)|worth (?:exploring|a conversation)',
    negatable: true,
  },
  {
    key: 'interested-de',
    re: 'klingt (?:sehr |wirklich )?(?:interessant|gut|spannend)|(?:bin|sind) (?:sehr )?interessiert|mehr (?:erfahren|informationen|infos|details)|schicken sie mir',
    negatable: true,
  },
  { key: 'interested-fr', re: "(?:ca|cela) m'interesse|(?:je suis|nous sommes) interesse|en savoir plus|envoyez-moi", negatable: true },
  {
    key: 'interested-es',
    re: 'me interesa|nos interesa|(?:estoy|estamos) interesad[oa]s?|mas informacion|cuentame mas|cuenteme mas',
    negatable: true,
  },
  { key: 'interested-it', re: 'mi interessa|ci interessa|(?:sono|siamo) interessat[oie]|maggiori informazioni', negatable: true },
]);

/** Words of an out-of-office subject ("Out of Office: …", "Abwesenheitsnotiz", "Fuori sede"), folded. */
const OOO_SUBJECT =
  /(?<![a-z])(?:out of (?:the )?office|ooo|away|on leave|annual leave|out until|days off|abwesen|vacation|holiday|urlaub|absence|absent|conges|vacances|vacaciones|ausente|ausencia|fuera de la oficina|fuori sede|fuori ufficio|ferie|assente|assenza|vacanza|afwezig|vakantie|verlof|franvaro|poissa|fora do escritorio|licenca)/;

/** Out-of-office wording in a subject or a text (folded inside). */
export function outOfOfficeWording(subject: string | null, text: string): PhraseMatch | null {
  if (subject) {
    const m = OOO_SUBJECT.exec(fold(subject));
    if (m) return { key: 'subject', index: m.index, text: m[0] };
  }
  return OUT_OF_OFFICE.find(fold(text));
}
