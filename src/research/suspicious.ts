// Instruction-like text in a source: a passage of a fetched page or feed that speaks to an AI
// model rather than to a reader (imperatives aimed at an assistant, "ignore previous
// instructions" in any of the common languages, role and prompt markers, chat-template tokens).
// Such a passage is research's attacker, not its evidence: it is left out of the dossier's facts,
// and out of every prompt, whole (a passage is a text block, a heading, a title, a description,
// a feed item). The text is judged as a model would read it: compatibility forms folded (NFKC),
// invisible characters removed (zero-width, soft hyphen, bidi controls), invisible tag characters
// read as the ASCII they encode, and the Cyrillic and Greek letters that look Latin read as Latin.
// Hidden text (display:none and the like) is removed earlier, by extraction (extract.ts).
import type { CrawlResult } from './crawl.js';

/** Lower-case Cyrillic and Greek letters drawn like Latin ones (after Unicode's confusables for a-z), pairwise. */
const LOOK_ALIKES = 'аaвbеeёeһhіiїiјjкkӏlмmнhоoпnрpсcтtуyўyхxѕsԁdԛqԝwɑaαaβbγyεeηnιiκkνvοoρpτtυuχxωw';
const LATIN_OF = new Map<string, string>();
for (let i = 0; i < LOOK_ALIKES.length; i += 2) LATIN_OF.set(LOOK_ALIKES[i], LOOK_ALIKES[i + 1]);

const TAG_FIRST = 0xe0000;

const TAGGED = /[\u{E0020}-\u{E007E}]/gu;
const INVISIBLE = /\p{Cf}/gu;
const LOOK_ALIKE = new RegExp(`[${[...LATIN_OF.keys()].join('')}]`, 'g');

/** The text as a model reads it: NFKC, tag characters as ASCII, invisible characters dropped, lower case. */
export function asRead(text: string): string {
  return text
    .normalize('NFKC')
    .replace(TAGGED, (ch) => String.fromCodePoint(ch.codePointAt(0)! - TAG_FIRST))
    .replace(INVISIBLE, '')
    .replace(/\s+/g, ' ')
    .toLowerCase();
}

/** The same text with look-alike letters read as Latin (only for the Latin-script patterns). */
const skeleton = (read: string) => read.replace(LOOK_ALIKE, (ch) => LATIN_OF.get(ch) ?? ch);

/** Words that name an AI model unambiguously. */
const AI = String.raw`(?:ai|a\.i\.|llms?|gpts?|chatgpt|claude|gemini|copilot|language models?|chat ?bots?|(?:ai|virtual|digital) (?:assistant|model|agent|system|tool|crawler|writer|reader)s?)`;
/** Those, and the words that name one in context (an "assistant" told to do something). */
const AI_OR_TOOL = `(?:${AI}|assistants?|bots?|crawlers?|scrapers?)`;
const ORDERS = `(?:instructions?|prompts?|rules|guidelines|directions|directives|guardrails|constraints|system messages?)`;
const OUTPUT = `(?:reply|response|answer|output|e-?mail|message|draft|summary)`;
const IMPERATIVE = String.raw`(?:please|you|ignore|disregard|forget|do|don'?t|never|always|make|write|say|tell|include|add|offer|mention|promise|use|when|if|from now)\b`;

/** Patterns on the Latin skeleton of the text (English and the other Latin-script languages). */
const LATIN: Array<[string, RegExp]> = [
  ['an order to ignore instructions', new RegExp(String.raw`\b(?:ignore|disregard|forget|override|bypass)\b.{0,40}\b${ORDERS}`)],
  ['earlier instructions named', /\b(?:previous|prior|earlier|above|preceding)\s+(?:instructions?|prompts?|directions|directives)\b/],
  ['new instructions', /\bnew (?:instructions?|rules|directives?)\b\s*[:\-–]/],
  ['a system or developer prompt', /\b(?:system|developer|hidden|secret) (?:prompt|message|instructions?)\b/],
  [
    'a note to an AI',
    new RegExp(
      String.raw`\b(?:note|message|instructions?|attention|notice|reminder|hint|memo|request)s? (?:to|for) (?:any |all |the |every )?${AI_OR_TOOL}\b`,
    ),
  ],
  ['an AI addressed', new RegExp(String.raw`\b(?:dear|hey|hello|hi|attention|attn)[,:]? (?:the |any |all )?${AI_OR_TOOL}\b`)],
  ['an AI addressed', new RegExp(String.raw`(?:^|[.!?:;|–—-]\s*)(?:${AI}|assistants?)\s*[:,]\s*${IMPERATIVE}`)],
  [
    'an AI addressed',
    new RegExp(String.raw`\bif you(?:'re| are) (?:an? |the )?(?:${AI}|assistant|bot|crawler|scraper|automated|a program|reading this as)`),
  ],
  [
    'an AI addressed',
    new RegExp(
      String.raw`\b(?:${AI}|crawlers?|scrapers?|bots?) (?:reading|processing|summari[sz]ing|writing|drafting|parsing|crawling|scraping|that reads?|who reads?|must|should|shall|are (?:required|instructed|told|asked|to))\b`,
    ),
  ],
  [
    'a role given',
    new RegExp(
      String.raw`\byou are (?:now |no longer |hereby )?(?:an? |the |my |our )?(?:${AI}|assistant|bot|helpful|sender'?s?|sales ?(?:rep|assistant|writer)|email writer|copywriter)`,
    ),
  ],
  ['a role given', /\b(?:pretend (?:to be|you are)|role-?play as|from now on,? you|you will now act|act as if you)\b/],
  [
    'an order about the output',
    new RegExp(
      String.raw`\b(?:include|add|insert|mention|say|write|put|state|place|append|embed)\b.{0,60}\bin(?:to)? (?:your|the|every|each|any) ${OUTPUT}\b`,
    ),
  ],
  [
    'an order about the output',
    new RegExp(
      String.raw`\b(?:when|while|if) (?:you(?:'re| are) )?(?:writing|drafting|composing|summari[sz]ing|generating|answering|replying)\b.{0,40}\b(?:${OUTPUT}|about (?:us|this|the company))`,
    ),
  ],
  [
    'an order about the reader',
    /\b(?:tell|inform|remind|promise|assure|convince|say to|write to|offer)\s+(?:the|your|every|each|any|this|all)\s+(?:readers?|recipients?|prospects?|users?|leads?)\b/,
  ],
  ['an order about the reader', /\b(?:tell|inform|remind|promise|assure|offer)\s+(?:readers|recipients)\b/],
  [
    'an order about the reader',
    /(?:^|[.:;!?,]\s*|\band\s+|\bthen\s+|\bplease\s+)(?:say|state|write|claim|mention|promise|tell them) that\b/,
  ],
  [
    'a request to reveal or hide',
    /\b(?:do not|don'?t|never) (?:reveal|disclose|mention|show) (?:these|this|the|your) (?:instructions?|prompt|message|rules)\b/,
  ],
  ['a request to reveal or hide', /\b(?:print|repeat|reveal|output|show) (?:your|the) (?:system )?(?:prompt|instructions)\b/],
  ['injection vocabulary', /\b(?:jailbreak|prompt injection|developer mode|dan mode|do anything now)\b/],
  // Other Latin-script languages: "ignore the previous instructions", "you are an assistant".
  [
    'an order to ignore instructions (es/pt/it)',
    /\b(?:ignora|ignore|ignorar|ignorare|olvida|olvide|omite|esquece|esqueça|dimentica)\b.{0,40}\b(?:instrucciones|instru[cç](?:oe|õe)s|istruzioni|reglas|regras|regole)\b/,
  ],
  [
    'earlier instructions named (es/pt/it)',
    /\b(?:instrucciones|instru[cç](?:oe|õe)s|istruzioni) (?:anteriores|previas|precedentes|precedenti|pr[eé]vias)\b/,
  ],
  ['an order to ignore instructions (fr)', /\b(?:ignor(?:e|ez|er)|oubli(?:e|ez))\b.{0,40}\b(?:instructions|consignes|r[eè]gles)\b/],
  ['earlier instructions named (fr)', /\b(?:instructions|consignes) (?:pr[eé]c[eé]dentes|ant[eé]rieures|ci-dessus)\b/],
  [
    'an order to ignore instructions (de)',
    /\b(?:ignorier\w*|vergiss|vergessen sie|missachte\w*)\b.{0,40}\b(?:anweisungen|instruktionen|befehle|regeln|vorgaben)\b/,
  ],
  ['earlier instructions named (de)', /\b(?:vorherigen|bisherigen|obigen|vorigen|fr[uü]heren) (?:anweisungen|instruktionen|befehle)\b/],
  ['an order to ignore instructions (nl)', /\b(?:negeer|vergeet)\b.{0,40}\b(?:instructies|regels)\b/],
  [
    'an order to ignore instructions (pl)',
    /\b(?:zignoruj|ignoruj)\b.{0,40}\b(?:instrukcje|polecenia)\b|\bpoprzednie (?:instrukcje|polecenia)\b/,
  ],
  ['an order to ignore instructions (tr)', /(?:onceki|önceki) talimat|talimatlar[iı] (?:yok say|g[oö]rmezden gel)/],
  [
    'a role given (other languages)',
    /\b(?:eres|usted es|tu es|vous [eê]tes|du bist|voc[eê] [eé]|jij bent) (?:ahora |maintenant |jetzt |agora |nu )?(?:un|une|el|l'|ein|der|o|een) ?(?:asistente|assistant|assistent|assistente|ia|ki|modelo|mod[eè]le|modell)\b/,
  ],
];

/** Patterns on the text as read (scripts other than Latin keep their letters). */
const OTHER_SCRIPTS: Array<[string, RegExp]> = [
  [
    'an order to ignore instructions (ru/uk)',
    /(?:игнорируй|игнорируйте|проигнорируй|забудь|забудьте|ігноруй|забудь)[\s\S]{0,40}(?:инструкци|указани|правил|інструкці)/,
  ],
  ['earlier instructions named (ru/uk)', /(?:предыдущ|прежн|попередн)\S* (?:инструкци|указани|інструкці)/],
  ['an order to ignore instructions (zh)', /(?:忽略|无视|忽视|不要理会|無視|忽略掉)[\s\S]{0,12}(?:指令|指示|说明|說明|提示|规则|規則)/],
  ['earlier instructions named (zh)', /(?:之前|以前|上面|上述|先前|此前)的?(?:所有)?(?:指令|指示|提示)/],
  ['a role given (zh)', /你(?:现在|現在)?是[\s\S]{0,6}(?:助手|助理|模型|ai)/],
  [
    'an order to ignore instructions (ja)',
    /(?:指示|命令|プロンプト|ルール)[\s\S]{0,10}(?:無視|忘れ)|(?:無視|忘れ)[\s\S]{0,10}(?:指示|命令)/,
  ],
  ['an order to ignore instructions (ko)', /(?:이전|앞의|위의)[\s\S]{0,6}(?:지시|명령|지침)|(?:지시|명령|지침)[\s\S]{0,10}무시/],
  ['an order to ignore instructions (ar)', /(?:تجاهل|انس)[\s\S]{0,30}(?:التعليمات|الأوامر|تعليمات)/],
  ['an order to ignore instructions (hi)', /(?:पिछले|पिछली|पूर्व) (?:निर्देश|निर्देशों)|निर्देशों को (?:अनदेखा|नज़रअंदाज़)/],
];

/** Role and prompt markers, chat-template tokens: the grammar of a prompt, never of a web page. */
const MARKERS: Array<[string, RegExp]> = [
  [
    'a chat-template token',
    /<\|?\s*(?:im_start|im_end|im_sep|system|user|assistant|endoftext|eot_id|start_header_id|end_header_id|begin_of_text)\s*\|?>/,
  ],
  ['a chat-template token', /\[\/?inst\]|<<\/?sys>>|\[\/?(?:system|assistant|user)\]|<\/?(?:system|assistant|user|instructions?|prompt)>/],
  ['a role marker', /(?:^|[.!?]\s+)#{0,6}\s*(?:system|assistant|developer|human|user)\s*(?:prompt|message)?\s*:/],
  ['a prompt heading', /#{1,6}\s*(?:system|instructions?|assistant|user|prompt|developer)\b/],
  ['a prompt boundary', /\b(?:begin|end|start) (?:of )?(?:the )?(?:system|prompt|instructions)\b/],
];

const LETTER_SCRIPTS = /\p{Script=Latin}|\p{Script=Cyrillic}|\p{Script=Greek}/gu;

/** A word that mixes Latin letters with Cyrillic or Greek ones: a look-alike spelling. */
function mixedScriptWord(read: string): boolean {
  if (!/[\p{Script=Cyrillic}\p{Script=Greek}]/u.test(read)) return false;
  for (const word of read.split(/[^\p{L}]+/u)) {
    if (word.length < 3) continue;
    const scripts = new Set(
      (word.match(LETTER_SCRIPTS) ?? []).map((ch) => (/\p{Script=Latin}/u.test(ch) ? 'l' : /\p{Script=Cyrillic}/u.test(ch) ? 'c' : 'g')),
    );
    if (scripts.size > 1) return true;
  }
  return false;
}

/** Tag characters outside an emoji flag sequence (U+1F3F4 then tags) hide text from the eye. */
const hiddenTags = (text: string) => /[\u{E0020}-\u{E007E}]/u.test(text.replace(/\u{1F3F4}[\u{E0020}-\u{E007F}]+/gu, ''));

/**
 * Why a passage is instruction-like (text aimed at an AI model, a prompt's markers, hidden or
 * look-alike characters), or null for ordinary text.
 */
export function suspicious(text: string | null | undefined): string | null {
  if (!text) return null;
  if (hiddenTags(text)) return 'invisible tag characters';
  const read = asRead(text);
  for (const [why, re] of MARKERS) if (re.test(read)) return why;
  for (const [why, re] of OTHER_SCRIPTS) if (re.test(read)) return why;
  const latin = skeleton(read);
  for (const [why, re] of LATIN) if (re.test(latin)) return why;
  if (mixedScriptWord(read)) return 'look-alike letters from another script';
  return null;
}

const DROP = Symbol('suspicious');

/**
 * A copy of a value with every suspicious string left out: an array loses the element (an item
 * such as a feed entry or a link whose text is suspicious goes whole), an object's own field
 * becomes null. Generic, so a field added to the extracted page later is judged too.
 */
function clean(value: unknown, count: { n: number }, inArray: boolean): unknown {
  if (typeof value === 'string') {
    if (suspicious(value) === null) return value;
    count.n += 1;
    return DROP;
  }
  if (Array.isArray(value)) return value.map((v) => clean(v, count, true)).filter((v) => v !== DROP);
  if (value === null || typeof value !== 'object' || Object.getPrototypeOf(value) !== Object.prototype) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    const c = clean(v, count, false);
    if (c === DROP && inArray) return DROP;
    out[k] = c === DROP ? null : c;
  }
  return out;
}

/**
 * The crawl with its instruction-like passages left out (page titles, descriptions, structured
 * data, headings, text blocks, link texts, news entries and feed items), and how many there were.
 */
export function withoutSuspicious(crawl: CrawlResult): { crawl: CrawlResult; leftOut: number } {
  const count = { n: 0 };
  const pages = crawl.pages.map((p) => ({ ...p, page: clean(p.page, count, false) as typeof p.page }));
  const feed = crawl.feed ? { ...crawl.feed, items: clean(crawl.feed.items, count, false) as typeof crawl.feed.items } : null;
  return { crawl: { ...crawl, pages, feed }, leftOut: count.n };
}

interface CitableFact {
  text: string;
  source: { title: string; snippet: string };
}
interface CitableSource {
  url: string;
  title: string;
  snippet: string;
}

/**
 * Stored research as a draft may use it: facts whose text, snippet or source title is
 * instruction-like are left out, and such a source's title is its URL and its snippet empty
 * (sources keep their places: citations point at them by index). For research stored before
 * the dossier left such passages out.
 */
export function citableResearch<F extends CitableFact, S extends CitableSource, R extends { facts: F[]; sources: S[] }>(research: R): R {
  const facts = research.facts.filter((f) => !suspicious(f.text) && !suspicious(f.source.snippet) && !suspicious(f.source.title));
  const sources = research.sources.map((s) =>
    suspicious(s.title) || suspicious(s.snippet)
      ? { ...s, title: suspicious(s.title) ? s.url : s.title, snippet: suspicious(s.snippet) ? '' : s.snippet }
      : s,
  );
  return { ...research, facts, sources };
}
