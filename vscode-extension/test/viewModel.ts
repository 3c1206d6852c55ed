/**
 * What the page shows after the host's messages, folded as the page folds them: a reset, whole
 * entries (`entries`), and the deltas to a streamed entry (`append`, `finish`). For the tests
 * that read what the host posted to the view.
 */

import type { Entry, HostToView, ViewMeta } from '../src/common/view';

export function foldViewMessages(posted: readonly unknown[]): { meta: ViewMeta | undefined; entries: Entry[] } {
  let meta: ViewMeta | undefined;
  const entries = new Map<string, Entry>();
  for (const raw of posted) {
    const m = raw as HostToView;
    switch (m.type) {
      case 'reset':
        meta = m.state.meta;
        entries.clear();
        for (const e of m.state.entries) {
          entries.set(e.id, e);
        }
        break;
      case 'meta':
        meta = m.meta;
        break;
      case 'entries':
        for (const e of m.upserts) {
          entries.set(e.id, e);
        }
        for (const id of m.removed) {
          entries.delete(id);
        }
        break;
      case 'append':
      case 'finish': {
        const e = entries.get(m.id);
        if (e?.kind === 'agent' || e?.kind === 'thought') {
          entries.set(m.id, m.type === 'append' ? { ...e, text: e.text + m.text } : { ...e, streaming: false });
        }
        break;
      }
      default:
        break;
    }
  }
  return { meta, entries: [...entries.values()] };
}
