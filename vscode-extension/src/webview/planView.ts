/**
 * The model's plan above the transcript: its items in order, each ticked when completed and
 * marked while in progress, with how many are done; hidden while there is none. Each `plan`
 * update replaces the whole plan. An item is the model's inline Markdown (code, emphasis).
 */

import type { PlanItemView } from '../common/view';
import { byId, h } from './dom.js';
import { inlineMarkdown } from './messageRenderer.js';

const planEl = byId<HTMLElement>('plan');

const MARK: Record<PlanItemView['status'], string> = { completed: '☑', in_progress: '◐', pending: '☐' };
const SAID: Record<PlanItemView['status'], string> = { completed: 'done', in_progress: 'in progress', pending: 'to do' };

/** The plan last drawn, to draw it again only when it changed. */
let shownPlan: string | undefined;

export function renderPlan(plan: PlanItemView[] | undefined): void {
  const items = plan ?? [];
  const key = JSON.stringify(items);
  if (key === shownPlan) {
    return;
  }
  shownPlan = key;
  planEl.hidden = items.length === 0;
  if (items.length === 0) {
    planEl.replaceChildren();
    return;
  }
  const done = items.filter((i) => i.status === 'completed').length;
  // Kept open or folded as the user left it.
  const wasOpen = planEl.querySelector('details')?.open ?? true;
  const list = h(
    'ol',
    { class: 'plan-items' },
    ...items.map((item) =>
      h(
        'li',
        { class: `plan-item plan-${item.status} plan-priority-${item.priority}`, 'data-status': item.status },
        h('span', { class: 'plan-mark', 'aria-hidden': 'true' }, MARK[item.status]),
        h('span', { class: 'plan-content' }, ...inlineMarkdown(item.content)),
        h('span', { class: 'visually-hidden' }, ` (${SAID[item.status]}${item.priority === 'high' ? ', high priority' : ''})`),
      ),
    ),
  );
  const details = h('details', {}, h('summary', { class: 'plan-head' }, 'Plan ', h('span', { class: 'plan-progress' }, `${done}/${items.length} done`)), list);
  details.open = wasOpen;
  planEl.replaceChildren(details);
}
