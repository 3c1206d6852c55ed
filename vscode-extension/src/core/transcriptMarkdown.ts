/**
 * A session's transcript as Markdown, from the entries the chat view shows: what the history
 * list's Export saves. Speakers as headings ("You", "Parley"), thoughts quoted, tool calls with
 * their input and output as code, answered permissions, notices and edited files as lines.
 */

import type { Entry } from '../common/view';

/** A fence longer than any run of backticks in `text`. */
function fence(text: string): string {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  return '`'.repeat(longest + 1);
}

function codeBlock(text: string, language = ''): string {
  const f = fence(text);
  return `${f}${language}\n${text.replace(/\n$/, '')}\n${f}`;
}

function quote(text: string): string {
  return text
    .split('\n')
    .map((l) => (l ? `> ${l}` : '>'))
    .join('\n');
}

export function transcriptMarkdown(title: string | undefined, entries: Entry[]): string {
  const parts: string[] = [`# ${title?.trim() || 'Parley session'}`];
  let speaker: 'You' | 'Parley' | undefined;
  const say = (who: 'You' | 'Parley') => {
    if (speaker !== who) {
      parts.push(`## ${who}`);
      speaker = who;
    }
  };
  for (const e of entries) {
    switch (e.kind) {
      case 'user':
        speaker = undefined; // every prompt gets its heading
        say('You');
        if (e.text) {
          parts.push(e.text);
        }
        if (e.context.length) {
          parts.push(`Attached: ${e.context.map((c) => `\`${c.label}\``).join(', ')}`);
        }
        break;
      case 'agent':
        say('Parley');
        parts.push(e.text);
        break;
      case 'thought':
        say('Parley');
        parts.push(quote(`*Thought:* ${e.text}`));
        break;
      case 'tool': {
        say('Parley');
        const status = e.superseded ? 'superseded' : e.status === 'in_progress' ? 'running' : e.status;
        const lines = [`**Tool: ${e.title}** (${status})`];
        const code = e.content.flatMap((c) => (c.kind === 'text' ? [c.text] : []));
        const diffs = e.content.flatMap((c) => (c.kind === 'diff' ? [c] : []));
        if (code.length) {
          lines.push(codeBlock(code.join('\n')));
        } else if (e.input) {
          lines.push(codeBlock(e.input));
        }
        for (const d of diffs) {
          lines.push(`Edit \`${d.path}\` (+${d.added} −${d.removed}):`);
          lines.push(codeBlock(d.lines.map((l) => `${l.op}${l.text}`).join('\n'), 'diff'));
        }
        if (e.output !== undefined) {
          lines.push('Output:', codeBlock(e.output || '(no output)'));
        }
        parts.push(lines.join('\n\n'));
        break;
      }
      case 'permission':
        say('Parley');
        parts.push(`*Asked permission: ${e.title} — ${e.answer ? e.answer.label : 'not answered'}*`);
        break;
      case 'notice':
        parts.push(quote(e.level === 'error' ? `**Error:** ${e.text}` : e.level === 'warning' ? `**Warning:** ${e.text}` : e.text));
        break;
      case 'turn':
        parts.push(`*Edited ${e.files.map((f) => `\`${f}\``).join(', ')}${e.undo === 'undone' ? ' (undone)' : ''}*`);
        break;
    }
  }
  return `${parts.join('\n\n')}\n`;
}
