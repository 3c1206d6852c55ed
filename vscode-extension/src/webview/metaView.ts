/**
 * The view's meta: the toolbar's pickers (model, mode) and its settings menu (tool policy,
 * the server's other options), the plan, the banner (server state, loading), the usage line, the attachments
 * waiting, and what is said when a turn starts and ends.
 */

import type { ConfigOptionView, ViewMeta } from '../common/view';
import { formatContext, formatCost, formatTokens } from '../common/display.js';
import { attachedKernel } from '../common/kernel.js';
import { byId, h, post } from './dom.js';
import { chip } from './entryViews.js';
import { renderPlan } from './planView.js';
import { lastAnswerText, notices, status } from './transcript.js';

const sendButton = byId<HTMLButtonElement>('send-button');
const stopButton = byId<HTMLButtonElement>('stop-button');
const modelSelect = byId<HTMLSelectElement>('model');
const modeSelect = byId<HTMLSelectElement>('mode');
const toolPolicySelect = byId<HTMLSelectElement>('tool-policy');
const configOptionsEl = byId<HTMLElement>('config-options');
const usageEl = byId<HTMLElement>('usage');
const banner = byId<HTMLElement>('banner');
const chips = byId<HTMLElement>('context-chips');

/** The meta shown (the composer reads it: busy, attachments, commands). */
export const shown: { meta: ViewMeta | undefined } = { meta: undefined };

/** Say (to a screen reader) that a turn started, or how it ended: the answer, or that it finished. */
function announceTurn(wasBusy: boolean, busy: boolean): void {
  if (busy && !wasBusy) {
    notices.said = 0;
    status.say('Parley is answering…');
  } else if (!busy && wasBusy) {
    // Read once the answer's last chunk is on the page (text is drawn at most once a frame).
    requestAnimationFrame(() =>
      setTimeout(() => {
        const answer = lastAnswerText();
        if (answer) {
          status.say(`Parley answered: ${answer}`);
        } else if (notices.said === 0) {
          status.say('Parley finished.'); // unless a notice ("Stopped.", an error) said why
        }
      }, 0),
    );
  }
}

export function renderMeta(m: ViewMeta): void {
  const wasBusy = shown.meta?.busy ?? false;
  shown.meta = m;
  announceTurn(wasBusy, m.busy);
  sendButton.hidden = m.busy;
  stopButton.hidden = !m.busy;
  sendButton.disabled = m.loading;
  document.body.classList.toggle('busy', m.busy);

  renderPickers(m);
  renderPlan(m.plan);

  // Banner: server state, loading.
  let text = '';
  if (m.serverState === 'starting') {
    text = 'Starting Parley…';
  } else if (m.loading) {
    text = 'Loading session…';
  } else if (m.serverState === 'exited') {
    text = 'The Parley server is not running. Sending a prompt restarts it.';
  }
  banner.textContent = text;
  banner.hidden = text === '';

  // Usage line.
  const parts: string[] = [];
  if (m.title) {
    parts.push(m.title);
  }
  const kernel = attachedKernel(m.configOptions);
  if (kernel) {
    parts.push(kernel.name); // the user's kernel the Python tools run in, by the server's name
  }
  parts.push(`${formatTokens(m.usage.sessionTokens)} tokens`);
  if (m.usage.cost) {
    parts.push(formatCost(m.usage.cost));
  }
  if (m.usage.contextUsed !== undefined) {
    parts.push(formatContext(m.usage.contextUsed, m.usage.contextSize));
  }
  usageEl.textContent = parts.join(' · ');
  const cached = m.usage.cachedReadTokens ? ` (${m.usage.cachedReadTokens} from the cache)` : '';
  usageEl.title = `Input ${m.usage.inputTokens}${cached} · output ${m.usage.outputTokens} tokens this session`;

  // Context chips waiting for the next prompt.
  chips.replaceChildren(...m.context.map((c, i) => chip(c, () => post({ type: 'removeContext', index: i }))));
  chips.hidden = m.context.length === 0;
}

const TOOL_POLICIES: ConfigOptionView['options'] = [
  { value: 'hybrid', name: 'hybrid' },
  { value: 'stream', name: 'stream' },
  { value: 'sync', name: 'sync' },
];

/** `<option>`s for a select's values, under `<optgroup>`s where they are grouped. */
function optionElements(
  values: { value: string; name: string; description?: string; group?: string; disabled?: boolean; title?: string }[],
): HTMLElement[] {
  const out: HTMLElement[] = [];
  let group: HTMLElement | undefined;
  let groupName: string | undefined;
  for (const v of values) {
    const opt = h('option', { value: v.value }, v.name);
    if (v.disabled) {
      opt.setAttribute('disabled', '');
    }
    if (v.title ?? v.description) {
      opt.title = v.title ?? v.description ?? '';
    }
    if (v.group === undefined) {
      group = undefined;
      groupName = undefined;
      out.push(opt);
    } else {
      if (!group || groupName !== v.group) {
        group = h('optgroup', { label: v.group });
        groupName = v.group;
        out.push(group);
      }
      group.append(opt);
    }
  }
  return out;
}

function setSelect(select: HTMLSelectElement, values: Parameters<typeof optionElements>[0], current?: string): void {
  if (current !== undefined && !values.some((v) => v.value === current)) {
    values = [{ value: current, name: current }, ...values];
  }
  select.replaceChildren(...optionElements(values));
  if (current !== undefined) {
    select.value = current;
  }
  select.disabled = values.length === 0;
}

/**
 * The model picker, the tool-policy picker and any other select the server offers: from the
 * session's config options when there are some, else from the model list and the three policies.
 */
function renderPickers(m: ViewMeta): void {
  const modelOption = renderModelPicker(m);
  const policyOption = m.configOptions.find((o) => o.id === 'tool_policy');
  setSelect(toolPolicySelect, policyOption?.options ?? TOOL_POLICIES, policyOption?.currentValue ?? m.toolPolicy ?? 'hybrid');
  toolPolicySelect.title = policyOption?.description ?? 'How the server gets tool calls from the model';
  renderModePicker(m);
  renderOtherOptions(m.configOptions.filter((o) => o !== modelOption && o !== policyOption && !(m.mode && o.category === 'mode')));
}

/** The model picker: the model option's values, else the model list; an unavailable model disabled, saying why. Returns the model option. */
function renderModelPicker(m: ViewMeta): ViewMeta['configOptions'][number] | undefined {
  const modelOption = m.configOptions.find((o) => o.category === 'model');
  const known = new Map(m.models.map((x) => [x.id, x]));
  const unavailable = (id: string) => {
    const info = known.get(id);
    return info && !info.available ? { disabled: true, title: info.reason } : {};
  };
  const modelValues = modelOption
    ? modelOption.options.map((o) => ({ ...o, ...unavailable(o.value) }))
    : m.models.map((x) => ({ value: x.id, name: x.available ? x.id : `${x.id} (unavailable)`, ...unavailable(x.id) }));
  setSelect(modelSelect, modelValues, modelOption?.currentValue ?? m.model);
  return modelOption;
}

/** The mode, from `modes` or its config option: its own picker, next to the model's. */
function renderModePicker(m: ViewMeta): void {
  modeSelect.hidden = !m.mode;
  if (m.mode) {
    const current = m.mode.modes.find((x) => x.id === m.mode?.currentModeId);
    setSelect(modeSelect, m.mode.modes.map((x) => ({ value: x.id, name: x.name, description: x.description })), m.mode.currentModeId);
    modeSelect.title = `Mode: ${current?.name ?? m.mode.currentModeId}${current?.description ? ` — ${current.description}` : ''}`;
  }
}

/** A picker for each other select the server offers, kept across renders. */
function renderOtherOptions(others: ViewMeta['configOptions']): void {
  const shown = new Map([...configOptionsEl.querySelectorAll<HTMLSelectElement>('select')].map((el) => [el.dataset.configId, el]));
  configOptionsEl.replaceChildren(
    ...others.map((o) => {
      const select = shown.get(o.id) ?? h('select', { 'data-config-id': o.id, 'aria-label': o.name });
      select.title = o.description ?? o.name;
      setSelect(select, o.options, o.currentValue);
      select.onchange = () => post({ type: 'setConfigOption', configId: o.id, value: select.value });
      return h('label', { class: 'setting' }, o.name, ' ', select);
    }),
  );
}

const settingsButton = byId<HTMLButtonElement>('settings-button');
const settingsPanel = byId<HTMLElement>('settings');

/** The settings menu (tool policy, the server's other options) opens and closes under the toolbar. */
function setSettingsOpen(open: boolean): void {
  settingsPanel.hidden = !open;
  settingsButton.setAttribute('aria-expanded', String(open));
}

/** The toolbar's pickers post the user's choice; ⚙ opens the settings, Escape in them closes them. */
export function listenToToolbar(): void {
  settingsButton.addEventListener('click', () => setSettingsOpen(settingsPanel.hidden));
  settingsPanel.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') {
      setSettingsOpen(false);
      settingsButton.focus();
    }
  });
  modelSelect.addEventListener('change', () => post({ type: 'selectModel', model: modelSelect.value }));
  modeSelect.addEventListener('change', () => post({ type: 'setMode', modeId: modeSelect.value }));
  toolPolicySelect.addEventListener('change', () => post({ type: 'setConfigOption', configId: 'tool_policy', value: toolPolicySelect.value }));
}
