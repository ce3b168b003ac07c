/*
 * The size rule for events, computed once here so every backend applies the
 * same number: an event's size is the UTF-8 byte length of its payload's JSON
 * plus its metadata's JSON, written compactly as `JSON.stringify` writes them,
 * except that a number counts the characters of its plain decimal form.
 * PostgreSQL stores JSON numbers as `numeric` and prints them without an
 * exponent, so `1e300` (5 bytes of JavaScript JSON) comes back as 301 digits;
 * counting it as stored keeps a byte budget a bound on what a backend returns.
 */

/** Characters that `JSON.stringify` writes as an escape sequence. */
// eslint-disable-next-line no-control-regex -- the control characters are exactly what JSON escapes
const ESCAPED = /["\\\u0000-\u001f]/;

/** Bytes of `JSON.stringify(s)` in UTF-8, for a well-formed string. */
export function jsonStringBytes(s: string): number {
  let bytes = Buffer.byteLength(s, 'utf8') + 2;
  if (ESCAPED.test(s)) {
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      // `"`, `\`, and the control characters with a short escape (\b \t \n \f \r) take 2 bytes.
      if (c === 0x22 || c === 0x5c || c === 0x08 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d) bytes += 1;
      // Every other control character becomes `\u00XX`.
      else if (c < 0x20) bytes += 5;
    }
  }
  return bytes;
}

/** Characters of a finite number written in plain decimal notation (no exponent). */
export function jsonNumberBytes(x: number): number {
  const s = String(x);
  const e = s.indexOf('e');
  if (e < 0) return s.length;
  const sign = s.charCodeAt(0) === 0x2d ? 1 : 0;
  const digits = e - sign - (s.includes('.') ? 1 : 0);
  const exponent = Number(s.slice(e + 1));
  // 1.5e+21 -> "1500000000000000000000"; 1.5e-7 -> "0.00000015".
  if (exponent >= 0) return sign + Math.max(digits, exponent + 1);
  return sign + 1 + -exponent + digits;
}

/** Bytes of `null`, `true` and `false`. */
export function jsonLiteralBytes(value: boolean | null): number {
  return value === null || value === true ? 4 : 5;
}
