/** The server's one-line words with their code spans as code elements (text nodes, never HTML). */

import { codeSpans } from '../common/codeSpans.js';

export function withCodeSpans(text: string): (HTMLElement | string)[] {
  return codeSpans(text).map((part) => {
    if (!part.code) {
      return part.text;
    }
    const code = document.createElement('code');
    code.textContent = part.text;
    return code;
  });
}
