/**
 * The tenant redaction setting's masking: personal data and secret-shaped tokens in a ledger event's `data` replaced
 * by a mask that says what was there (`[email]`, `[phone]`, `[card]`, `[secret]`), before the event is appended, so
 * the ledger's hash chain covers the masked form and the raw value never reaches the database.
 *
 * What is masked: PEM private keys, JWTs (three base64url segments, the first a JSON header), `Bearer` values,
 * GitHub (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`) and Slack (`xox?-`) tokens, AWS access key ids
 * (`AKIA`/`ASIA`), `sk-` style API keys, email addresses, payment card numbers (13 to 19 digits, spaces or dashes
 * between, Luhn-checked: ISO/IEC 7812-1), phone numbers (an international `+` number of 7 to 15 digits, or the
 * `(555) 123-4567` / `555-123-4567` form), and long high-entropy strings (32 characters or more of letters, digits
 * and `+/=_-` mixing upper case, lower case and digits, above 4.2 bits per character). Left alone: UUIDs, dates and
 * timestamps, version strings, IP addresses, ports and short numbers, and hexadecimal digests (SHA-256 and the like),
 * which ledger events carry as ids and hashes.
 */
import { redactJson } from './redact.js';

/** The masks, each naming what it replaced. */
export const MASKS = { email: '[email]', phone: '[phone]', card: '[card]', secret: '[secret]' } as const;

/** Secret-shaped tokens, most specific first: each match becomes `[secret]` (a Bearer value keeps its scheme). */
const SECRET_PATTERNS: readonly RegExp[] = [
  /-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|$)/g,
  /\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g,
  /\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b/g,
  /\bxox[abposre]-[A-Za-z0-9-]{10,}/g,
  /\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/g,
  /\bsk-[A-Za-z0-9_-]{16,}/g,
];

const BEARER = /\b(Bearer\s+)(?!\[secret\])[A-Za-z0-9._~+/=-]+/gi;
const EMAIL = /[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/g;
/** 13 to 19 digits starting with 2 to 6 (the card networks; not an epoch time), one space or dash allowed between any two; not inside a longer run of digits or a word. */
const CARD = /(?<![\w-])[2-6](?:[ -]?\d){12,18}(?![\w-])/g;
const PHONE =
  /(?<![\w+.-])(?:\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?)(?:[ .-]?\d{2,4}){1,4}|\(\d{3}\) ?\d{3}[ .-]\d{4}|\d{3}[ .-]\d{3}[ .-]\d{4})(?![\w-])/g;
const LONG_TOKEN = /[A-Za-z0-9+/_-]{32,}={0,2}/g;

/** Whether `digits` pass the Luhn check (ISO/IEC 7812-1 annex B). */
function luhn(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return sum % 10 === 0;
}

/** Shannon entropy of `text` in bits per character. */
function entropy(text: string): number {
  const counts = new Map<string, number>();
  for (const c of text) counts.set(c, (counts.get(c) ?? 0) + 1);
  let bits = 0;
  for (const n of counts.values()) bits -= (n / text.length) * Math.log2(n / text.length);
  return bits;
}

/** Whether a long token looks random: mixed case and digits, not hexadecimal, above 4.2 bits per character. */
function highEntropy(token: string): boolean {
  if (/^[0-9a-f]+$/i.test(token.replace(/-/g, ''))) return false; // digests and ids
  return /[A-Z]/.test(token) && /[a-z]/.test(token) && /[0-9]/.test(token) && entropy(token) > 4.2;
}

/** `text` with every email, phone number, card number and secret-shaped token replaced by its mask. */
export function maskText(text: string): string {
  let out = text;
  for (const pattern of SECRET_PATTERNS) out = out.replace(pattern, MASKS.secret);
  out = out.replace(BEARER, `$1${MASKS.secret}`);
  out = out.replace(EMAIL, MASKS.email);
  out = out.replace(CARD, (match) => {
    const digits = match.replace(/[ -]/g, '');
    return digits.length >= 13 && luhn(digits) ? MASKS.card : match;
  });
  out = out.replace(PHONE, (match) => {
    const digits = match.replace(/\D/g, '').length;
    return digits >= 7 && digits <= 15 ? MASKS.phone : match;
  });
  return out.replace(LONG_TOKEN, (match) => (highEntropy(match) ? MASKS.secret : match));
}

/** `data` (a ledger event's `data`) with {@link maskText} applied to every string in it, keys included. */
export function maskData<T>(data: T): T {
  return redactJson(data, maskText);
}
