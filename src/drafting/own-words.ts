// The sender's own words in a draft, which state nothing about the prospect: greetings and the names
// in them (in the languages drafts are written in), sign-offs and the signature under them, meeting
// proposals with their days, times and durations, remarks about the email itself, and the words
// that mark a sentence as an observation about the prospect ("I saw", "congrats") or as a guess.

const L = '\\p{L}';

// A greeting opens a line: "Hi Dana,", "Olá Inês, tudo bem?", "Sehr geehrter Herr Dr. Müller,".
const GREETING = new RegExp(
  `^\\s*(?:hi|hello|hey|hiya|howdy|dear|greetings|good\\s+(?:morning|afternoon|evening|day)|olá|ola|oi|bom\\s+dia|boa\\s+(?:tarde|noite)|caro|cara|prezad[oa]|hola|buen[oa]s\\s+(?:días|dias|tardes|noches)|estimad[oa]s?|querid[oa]|hallo|guten\\s+(?:tag|morgen|abend)|liebe[rs]?|sehr\\s+geehrte[rs]?|moin|servus|grüezi|bonjour|bonsoir|salut|cher|chère|chers|ciao|buongiorno|buonasera|salve|gentile|egregio|hej|hei|hallå|kære|beste|goedemorgen|goedemiddag|goedendag|cześć|czesc|dzień\\s+dobry|witam|szanown[ya]|merhaba|selam|sayın|iyi\\s+günler|ahoj|dobrý\\s+den|здравствуйте|привет|добрый\\s+(?:день|вечер)|уважаем(?:ый|ая)|γεια\\s+σας|こんにちは|안녕하세요|你好|您好)(?![${L}])`,
  'iu',
);
/** Words a greeting or an address may hold besides names: titles, "and team", "there". */
const ADDRESS_WORDS = new Set(
  'and & e y et und i og ve van von de da do dos der den la le team there all everyone folks san sama mr mr. mrs mrs. ms ms. dr dr. prof prof. herr frau monsieur madame mademoiselle sr sr. sra sra. srta. dom dona señor señora don doña signor signora pan pani panie hanım bey'.split(
    ' ',
  ),
);
const NAME_WORD = new RegExp(`^(?:[\\p{Lu}][${L}'’.-]*|[${L}]+[様さん])$`, 'u');

/** A greeting at the start of a line: its length (what follows it is read as any text), or 0. */
export function greetingLength(line: string): number {
  const g = GREETING.exec(line);
  if (!g) return 0;
  let at = g[0].length;
  const rest = line.slice(at);
  const words = [...rest.matchAll(/[^\s,!:;—–]+|[,!:;—–]/gu)];
  let names = 0;
  for (const w of words) {
    const t = w[0];
    if (/^[,!:;—–]$/.test(t)) {
      at = g[0].length + (w.index ?? 0) + 1;
      // A comma right after the greeting word may come before the name ("Bom dia, Inês!").
      if (t === ',' && names === 0) continue;
      return at;
    }
    if (names < 6 && (ADDRESS_WORDS.has(t.toLowerCase()) || NAME_WORD.test(t.replace(/[.!?]+$/, '')))) {
      names += 1;
      at = g[0].length + (w.index ?? 0) + t.length;
      if (/[.!?]$/.test(t) && !ADDRESS_WORDS.has(t.toLowerCase())) return at;
      continue;
    }
    return at;
  }
  return line.length;
}

// A sign-off line: "Best,", "Cheers, Sam", "Mit freundlichen Grüßen", "Beste Grüße aus Lissabon".
const SIGN_OFF = new RegExp(
  `^\\s*(?:best(?:\\s+regards|\\s+wishes)?|kind(?:est)?\\s+regards|warm(?:est)?\\s+regards|regards|warmly|cheers|thanks(?:\\s+again|\\s+so\\s+much)?|thank\\s+you|many\\s+thanks|talk\\s+soon|speak\\s+soon|all\\s+the\\s+best|sincerely|yours(?:\\s+truly|\\s+sincerely)?|respectfully|take\\s+care|cumprimentos|com\\s+os\\s+melhores\\s+cumprimentos|melhores\\s+cumprimentos|atenciosamente|abraços?|um\\s+abraço|obrigad[oa]|saudações|un\\s+saludo|saludos(?:\\s+cordiales)?|atentamente|cordialmente|un\\s+abrazo|gracias|mit\\s+freundlichen\\s+grüßen|freundliche\\s+grüße|viele\\s+grüße|beste\\s+grüße|liebe\\s+grüße|herzliche\\s+grüße|schöne\\s+grüße|grüße|mfg|danke|bien\\s+à\\s+vous|bien\\s+cordialement|cordialement|salutations|bonne\\s+journée|merci|cordiali\\s+saluti|distinti\\s+saluti|saluti|un\\s+saluto|grazie|met\\s+vriendelijke\\s+groet(?:en)?|vriendelijke\\s+groet(?:en)?|groeten|pozdrawiam(?:\\s+serdecznie)?|z\\s+poważaniem|serdecznie|saygılarımla|iyi\\s+çalışmalar|teşekkürler|med\\s+venlig\\s+hilsen|venlig\\s+hilsen|med\\s+vennlig\\s+hilsen|vennlig\\s+hilsen|vänliga\\s+hälsningar|hälsningar|hilsen|mvh|с\\s+уважением|всего\\s+доброго|спасибо|よろしくお願いいたします|よろしくお願いします)(?![${L}])[\\s,.!]*(.*)$`,
  'iu',
);

/** Whether a line is a sign-off: the phrase, then nothing, a name, or where the sender writes from. */
export function isSignOff(line: string): boolean {
  if (line.trim().length > 60) return false;
  const m = SIGN_OFF.exec(line);
  if (!m) return false;
  const rest = m[1].trim();
  if (rest === '') return true;
  const words = rest.split(/\s+/);
  const from = /^(?:from|aus|de|desde|da|z|из|fra|van)$/i.test(words[0]) ? words.slice(1) : words;
  return from.length <= 4 && from.every((w) => NAME_WORD.test(w.replace(/[,.!|]+$/, '')) || /^[|–—-]$/.test(w));
}

const SIGNATURE_CONNECTOR = /^(?:of|at|for|and|&|de|da|do|du|des|der|die|für|und|y|e|et|la|le|van|von|i|w|в|и|の|[|–—,·•/-])$/iu;

/**
 * A line of the signature under a sign-off: a name, a title, a company, a phone number or an
 * address, not a sentence ("Congrats on the raise" after "Best," is read as any sentence).
 */
export function isSignatureLine(line: string): boolean {
  const t = line.trim();
  if (t.length > 70 || /[!?]$/.test(t) || (/\.$/.test(t) && !/\b(?:Inc|Ltd|Co|Corp|Jr|Sr|GmbH|S\.A|Ltda)\.$/.test(t))) return false;
  const words = t.split(/\s+/);
  return (
    words.length <= 8 &&
    words.every((w) => {
      const b = w.replace(/^[([]+|[),;:\]]+$/g, '');
      return b === '' || SIGNATURE_CONNECTOR.test(b) || /^[\p{Lu}\p{Lo}]/u.test(b) || /[\d@]|:\/\//u.test(b);
    })
  );
}

/** A postscript's marker at the start of a line ("P.S.", "PS:"). */
export const POSTSCRIPT = /^\s*(?:P\.\s?S\.|PS\b)[:\s-]*/;

/** A question: it ends with a question mark (Spanish opens with one). */
export const isQuestion = (s: string) => /[?？]\s*["'”’)»]*\s*$/.test(s) || /^\s*¿/.test(s);

/** A question that asks the reader to confirm a statement ("Skyhook launched in April, right?"). */
export const isTagQuestion = (s: string) =>
  /,\s*(?:right|correct|true|no|yes|isn't it|wasn't it|didn't you|don't you|haven't you|aren't you|am I right)\s*[?？]\s*$/i.test(s);

// What meeting proposals and calls to action talk about, in several languages.
const MEETING = new RegExp(
  `(?<![${L}])(?:call|calls|chat|meeting|meet|talk|speak|conversation|walkthrough|walk\\s+you\\s+through|demo|session|slot|slots|calendar|invite|around|available|availability|free|works?\\s+(?:[\\p{L}]+\\s+)?for\\s+you|suit|suits|coffee|connect|(?:find|grab|book|schedule|set\\s+up)\\s+(?:some\\s+)?time|time\\s+slots?|catch\\s+up|catch-up|stop\\s+by|drop\\s+by|minutes?|mins?|hours?|morning|mornings|afternoon|afternoons|evening|[0-9](?:am|pm)|o'clock|check\\s+back|follow\\s+up|circle\\s+back|touch\\s+base|reach\\s+out|(?:try|call|ring|phone|ping)\\s+you|another\\s+time|other\\s+times?|a\\s+better\\s+time|(?:if|whether)\\s[^.?!]{0,40}?works|chamada|conversa|falar|reunião|minutos|disponibilidade|disponível|llamada|reunión|conversar|ligar|chiamata|telefonata|incontro|sentirci|vederci|parlarne|minuti|hablar|hablamos|hablemos|charlar|charlamos|conversamos|quedamos|llamarte|llamaros|falamos|conversamos|ligar-lhe|ligo|conversación|mañana|tarde|manhã|hora|horas|gespräch|austausch|termin|minuten|zeit|telefonieren|sprechen|appel|appeler|échange|échanger|échangeons|rendez-vous|disponible|parler|heure|heures|quart\\s+d'heure|matin|matinée|après-midi|créneau|uhr|vormittag|nachmittag|rozmowa|rozmowę|spotkanie|minut|porozmawiać|görüşme|toplantı|dakika|dakikalık|konuşma|snak|møde|minutter|созвониться|звонок|встреча|минут|お時間|打ち合わせ|面談)(?![${L}])|[0-9]+分`,
  'iu',
);
/** A first-person proposal of a time or a next step ("I can also do 8:30am", "I'll be in Columbus on May 14"). */
const PROPOSAL =
  /\b(?:I can|I could|I'm free|I am free|I'll be|I will be|I'm in|I am in|I'm around|I'm visiting|I'll be visiting|we could|we can|let's|how about|what about|happy to|I'd be happy|I'll check back|I'll follow up|I'll circle back|I'll reach out|I'll send|I'll try|I'll call|I'll give you|let me know|shall I|shall we)\b/i;

/** A meeting proposal: a question, or a first-person proposal, about a call, a time or a next step. */
export function isMeetingProposal(s: string): boolean {
  if (!MEETING.test(s)) return false;
  return isQuestion(s) || PROPOSAL.test(s) || /^\s*(?:worth|open to|free for|up for|would|could|can|does|do|is|are)\b/i.test(s);
}

/** The sentence speaks in the first person (the sender) before it speaks of the reader. */
export const FIRST_PERSON =
  /(?<![\p{L}'’])(?:we|we're|we've|we'd|we'll|our|ours|us|I|I'm|I've|I'd|I'll|my|me|wir|unser\p{L}*|uns|nous|notre|nos|nosotros|nuestr\p{L}+|nós|noss\p{L}+|somos|siamo|мы|наш\p{L}*)(?![\p{L}'’])/iu;
export const SECOND_PERSON = /(?<![\p{L}'’])(?:you|your|yours|you're|you've|you'd|you'll|yourself|y'all)(?![\p{L}'’])/iu;

/** First-person sentences that state no fact about the sender: intentions, wishes, guesses, remarks about the email. */
export const INTENT =
  /^\s*(?:(?:and |so |but )?I(?:'d| would| will|'ll| can| could| want| wanted| was wondering| wonder| hope| know| think| imagine| guess| bet| suspect| assume| thought| figured| love|'d love| won't| will not| don't| do not| can't| cannot| shall| am happy|'m happy| am glad|'m glad| am curious|'m curious| am writing|'m writing| am reaching|'m reaching| am following|'m following| have (?:\S+ ){0,2}(?:questions?|ideas?|thoughts?|suggestions?)|'m not sure| am not sure)\b|(?:we|I)(?:'d| would) (?:love|like|be glad|be happy)|(?:just )?(?:following up|bumping|looping back|circling back|checking in)|this is my|thanks|thank you|hope|hoping|apologies|sorry|no worries|no pressure|feel free|let me know)/i;

/** A guess or a hedge: what follows is not stated as a fact. */
export const HEDGE =
  /\b(?:I imagine|I'd imagine|I guess|I'd guess|I bet|I suspect|I assume|I think|I wonder|perhaps|maybe|probably|presumably|chances are|my guess is|might|may be|could be|if|in case|whether)\b/i;

/**
 * A guess stated about someone ("I imagine your team is growing fast", "Your sales cycle is
 * probably long", "Supongo que estáis contratando"): a guess about the prospect states a fact about
 * them, only less firmly, so it needs the same support as a statement.
 */
export const GUESS =
  /(?<![\p{L}'’])(?:I(?:'d| would)? (?:imagine|guess|bet|suspect|assume|reckon)|I'm (?:guessing|betting|assuming|sure)|my (?:guess|hunch|sense|bet) is|I have a (?:hunch|feeling)|I'd wager|chances are|odds are|probably|likely|presumably|no doubt|surely|sounds like|seems like|I take it|imagino|supongo|suponho|sospecho|seguramente|probablemente|provavelmente|ich vermute|ich nehme an|ich schätze|vermutlich|wahrscheinlich|sicherlich|j'imagine|je suppose|je parie|je devine|sans doute|probablement|sûrement|immagino|suppongo|probabilmente|sicuramente|ik vermoed|ik neem aan|waarschijnlijk)(?![\p{L}'’])/iu;
/** The reader in other languages than English (pronouns and possessives; Spanish "vosotros" verbs). */
export const SECOND_PERSON_OTHER =
  /(?<![\p{L}'’])(?:vous|votre|vos|tu|te|ti|toi|ton|ta|tes|dich|dir|euch|sie|ihr|ihre|ihrem|ihren|ihrer|ihres|du|dein\p{L}*|euer|eure\p{L}*|usted|ustedes|vuestr\p{L}*|tus|você|vocês|seu|sua|seus|suas|voss[oa]s?|vostr\p{L}*|tuo|tua|tuoi|jullie|uw|jouw)(?![\p{L}'’])|(?<![\p{L}])\p{L}{2,}(?:áis|éis)(?![\p{L}])/iu;
/** A guessed clause that opens on a definite subject ("the team", "a equipa", "das Team") speaks of the prospect's things. */
const DEFINITE = /^(?:the|der|die|das|dem|den|l'|le|la|les|el|los|las|il|lo|gli|het|de|a|o|as|os)\s/i;
/** A guessed clause about the sender, the email itself, or a condition. */
const NOT_ABOUT_THEM =
  /^(?:if|whether|unless|when|si|se|wenn|falls|ob|als|this|that|it|it's|these|here|there|there's|esto|esta|este|isso|isto|cela|ça|ceci|c'est|das ist|dies|questo|questa|dit)(?![\p{L}'’])/iu;

/**
 * The guess marker of a sentence that guesses at the prospect (their team, figures, situation), or
 * null. `mentions` says whether a text names the prospect. A question, a meeting proposal or a
 * guess about the sender or the email is no such guess.
 */
export function guessAboutProspect(text: string, mentions: (s: string) => boolean): string | null {
  const m = GUESS.exec(text);
  if (!m || isQuestion(text)) return null;
  const adverb =
    /^(?:probably|likely|presumably|no doubt|surely|seguramente|probablemente|provavelmente|vermutlich|wahrscheinlich|sicherlich|sans doute|probablement|sûrement|probabilmente|sicuramente|waarschijnlijk)$/i.test(
      m[0],
    );
  const clause = (adverb ? text.replace(/^\s*(?:it's|it is|it seems|that's)\s+/i, '') : text.slice((m.index ?? 0) + m[0].length))
    .replace(/^[\s,:;—–-]*(?:that|que|qu'|dass|che|dat)?[\s,]*/i, '')
    .replace(/^(?:and|but|so)\s+/i, '');
  const first = clause.split(/\s+/)[0] ?? '';
  if (clause === '' || NOT_ABOUT_THEM.test(clause) || FIRST_PERSON.test(first.replace(/[,.:;]+$/, ''))) return null;
  if (/^(?:ich|je|j'|yo|eu|io|ik)$/i.test(first)) return null;
  const about = SECOND_PERSON.test(clause) || SECOND_PERSON_OTHER.test(clause) || DEFINITE.test(clause) || mentions(clause);
  return about ? m[0] : null;
}

/** Marks a sentence as an observation about the prospect: "I saw", "congrats", "loved the interview". */
export const OBSERVATION =
  /(?<![\p{L}])(?:I (?:also |just |recently |once )?(?:saw|noticed|read|heard|hear|came across|see|spotted|learned|learnt)|I've heard|I'm hearing|saw that|noticed that|read that|looks like|it looks like|congrat\p{L}*|kudos|loved|enjoyed|impressed|great to see|nice to see|well done|parabéns|vi que|li que|felicidades|felicitaciones|enhorabuena|félicitations|bravo|j'ai vu|j'ai lu|glückwunsch\p{L}*|gratuliere|habe gesehen|habe gelesen|gratulacje|widziałem|widziałam|tebrikler|tebrik ederim|gördüm|tillykke|поздравляю|поздравления|видел|видела)(?![\p{L}])|拝見|おめでとう/iu;
/** Congratulations imply a recent event: they need a dated source. */
export const CONGRATS =
  /(?<![\p{L}])(?:congrat\p{L}*|kudos|parabéns|felicidades|felicitaciones|enhorabuena|félicitations|glückwunsch\p{L}*|gratuliere|gratulacje|tebrikler|tebrik ederim|tillykke|поздравляю|поздравления)(?![\p{L}])|おめでとう/iu;

/** Nouns a number can count without claiming anything: the email's own questions, ideas, pages. */
export const META_COUNT =
  /^(?:[\s-]*(?:(?:quick|short|brief|small|simple|more|last|final|specific|concrete|practical)\s+)*(?:questions?|ideas?|thoughts?|notes?|lines?|sentences?|points?|things?|emails?|messages?|pages?|slides?|examples?|tips?|steps?|ways?|options?|perguntas?|ideias?|preguntas?|fragen?|ideen?|idées?)|-(?:minute|min|second|hour)\b)(?![\p{L}])/iu;

/** German writes every noun with a capital: a capitalized word alone there is no sign of a name. */
export const GERMAN =
  /(?<![\p{L}])(?:ich|sie|ihnen|und|der|das|dem|ein|eine|einen|nicht|mit|für|ist|wäre|hätten|darf|kurz|zum|zur|auf|bei|wie|wir|uns|oder|gerne|gern|ihre|ihr|ihrem|ihren|nächste|woche|passt)(?![\p{L}])/iu;

// Day and month names (several languages) and other words of a date.
const DAYS =
  'monday|tuesday|wednesday|thursday|friday|saturday|sunday|segunda-feira|terça-feira|quarta-feira|quinta-feira|sexta-feira|sábado|domingo|lunes|martes|miércoles|jueves|viernes|montag|dienstag|mittwoch|donnerstag|freitag|samstag|sonntag|lundi|mardi|mercredi|jeudi|vendredi|samedi|dimanche|poniedziałek|wtorek|środa|czwartek|piątek|sobota|niedziela|pazartesi|salı|çarşamba|perşembe|cuma|cumartesi|pazar|mandag|tirsdag|onsdag|torsdag|fredag|lørdag|søndag';
const MONTHS =
  'january|february|march|april|may|june|july|august|september|october|november|december|janeiro|fevereiro|março|abril|maio|junho|julho|agosto|setembro|outubro|novembro|dezembro|enero|febrero|marzo|mayo|junio|julio|septiembre|octubre|noviembre|diciembre|januar|februar|märz|juni|juli|oktober|dezember|janvier|février|mars|avril|mai|juin|juillet|août|septembre|octobre|novembre|décembre';
/** A day or month name, a quarter (Q3), as a date word (the pattern, for composing others). */
export const DATE_WORD = new RegExp(`(?<![${L}])(?:${DAYS}|${MONTHS}|q[1-4])(?![${L}])`, 'giu');
const DATE_WORDS = new Set([...DAYS.split('|'), ...MONTHS.split('|'), 'q1', 'q2', 'q3', 'q4']);
export const isDateWord = (w: string) => DATE_WORDS.has(w.toLowerCase());

/** The date words of a text, where they stand (a word lookup: faster than the pattern). */
export function dateWords(text: string): Array<{ word: string; index: number }> {
  const out: Array<{ word: string; index: number }> = [];
  for (const m of text.matchAll(/[\p{L}\p{N}]+(?:-[\p{L}]+)?/gu))
    if (DATE_WORDS.has(m[0].toLowerCase())) out.push({ word: m[0], index: m.index ?? 0 });
  return out;
}
