/**
 * The status bar item's tooltip, as Markdown: the server's state, the model, the user's kernel
 * the session is attached to (by the server's names), the session's
 * tokens and cost (split by kind of token when the server says), the last turn's split.
 * Pure, so that it is tested without VS Code.
 */

import type { ViewMeta } from '../common/view';
import { formatCost } from '../common/display';
import { attachedKernel } from '../common/kernel';

type Breakdown = NonNullable<ViewMeta['usage']['costBreakdown']>;

/** A cost split as read: its parts that are not zero, e.g. `input $0.0120, output $0.0300`; '' when all are. */
export function costBreakdownText(b: Breakdown): string {
  const parts: [string, number][] = [
    ['input', b.uncachedInput],
    ['cache reads', b.cacheReads],
    ['cache writes', b.cacheWrites],
    ['output', b.output],
  ];
  return parts
    .filter(([, amount]) => amount !== 0)
    .map(([name, amount]) => `${name} ${formatCost(amount)}`)
    .join(', ');
}

export function statusTooltipMarkdown(m: ViewMeta): string {
  const lines = [`**Parley** — ${m.serverState}`, `Model: \`${m.model ?? 'default'}\``];
  if (m.toolPolicy) {
    lines.push(`Tool calls: ${m.toolPolicy}`);
  }
  const kernel = attachedKernel(m.configOptions);
  if (kernel) {
    lines.push(`${kernel.option}: ${kernel.name}`);
  }
  lines.push(`Session tokens: ${m.usage.sessionTokens} (input ${m.usage.inputTokens}, output ${m.usage.outputTokens})`);
  if (m.usage.cachedReadTokens) {
    lines.push(`Read from the prompt cache: ${m.usage.cachedReadTokens} input tokens`);
  }
  const split = m.usage.costBreakdown ? costBreakdownText(m.usage.costBreakdown) : '';
  const cost = m.usage.cost ? `${formatCost(m.usage.cost)} ${m.usage.cost.currency}` : 'unknown';
  lines.push(`Cost: ${cost}${split ? ` (${split})` : ''}`);
  const lastTurn = m.usage.lastTurn?.costBreakdown;
  if (lastTurn) {
    lines.push(`Last turn: ${costBreakdownText(lastTurn) || formatCost(0)}`);
  }
  return lines.join('\n\n');
}
