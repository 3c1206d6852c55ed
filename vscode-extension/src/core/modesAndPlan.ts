/**
 * The session's mode and the model's plan as the view shows them, from their wire forms:
 * ACP's `modes` (answers of `session/new`, `load`, `resume`), the `mode` config option
 * (category `mode`), `current_mode_update`, and `plan` updates. Pure.
 */

import type { ConfigOptionView, ModeView, PlanItemView } from '../common/view';
import type { PlanEntry, SessionModeState } from '../client/protocol';

/** The category of the config option that holds the session's mode. */
export const MODE_CATEGORY = 'mode';

const PLAN_STATUSES: readonly PlanItemView['status'][] = ['pending', 'in_progress', 'completed'];
const PLAN_PRIORITIES: readonly PlanItemView['priority'][] = ['high', 'medium', 'low'];

/** The mode shown from ACP's `modes`, changed by `session/set_mode`; undefined when the server sent none (or nonsense). */
export function modeFromModes(modes: SessionModeState | null | undefined): ModeView | undefined {
  if (!modes || typeof modes.currentModeId !== 'string' || !Array.isArray(modes.availableModes)) {
    return undefined;
  }
  const available = modes.availableModes
    .filter((m) => typeof m?.id === 'string' && m.id !== '')
    .map((m) => ({ id: m.id, name: typeof m.name === 'string' && m.name ? m.name : m.id, ...(m.description ? { description: m.description } : {}) }));
  return { currentModeId: modes.currentModeId, modes: available, via: { method: 'set_mode' } };
}

/**
 * The mode shown once the session's options are `options`: a mode known from `modes` keeps
 * its way of changing (`session/set_mode`) and takes the option's current value; otherwise
 * the `mode` option, if any, is the mode (changed through the option).
 */
export function modeWithOptions(shown: ModeView | undefined, options: ConfigOptionView[]): ModeView | undefined {
  const option = options.find((o) => o.category === MODE_CATEGORY);
  if (!option) {
    return shown;
  }
  if (shown?.via.method === 'set_mode') {
    return shown.currentModeId === option.currentValue ? shown : { ...shown, currentModeId: option.currentValue };
  }
  return {
    currentModeId: option.currentValue,
    modes: option.options.map((o) => ({ id: o.value, name: o.name, ...(o.description ? { description: o.description } : {}) })),
    via: { method: 'config_option', configId: option.id },
  };
}

/** The mode shown after a `current_mode_update`: a mode not listed is shown by its id. */
export function modeChanged(shown: ModeView | undefined, currentModeId: string): ModeView | undefined {
  if (typeof currentModeId !== 'string' || currentModeId === '') {
    return shown;
  }
  if (!shown) {
    return { currentModeId, modes: [{ id: currentModeId, name: currentModeId }], via: { method: 'set_mode' } };
  }
  return shown.currentModeId === currentModeId ? shown : { ...shown, currentModeId };
}

/** A `plan` update's entries as shown: the whole plan; an unknown status shows as pending, an unknown priority as medium. */
export function planView(entries: unknown): PlanItemView[] {
  if (!Array.isArray(entries)) {
    return [];
  }
  return entries
    .filter((e): e is PlanEntry => typeof e === 'object' && e !== null && typeof (e as PlanEntry).content === 'string')
    .map((e) => ({
      content: e.content,
      status: PLAN_STATUSES.find((s) => s === e.status) ?? 'pending',
      priority: PLAN_PRIORITIES.find((p) => p === e.priority) ?? 'medium',
    }));
}
