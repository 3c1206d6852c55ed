/**
 * Models and the session's configuration: the models the server offers, the one chosen (for
 * this session and new ones), the tool policy, the session's mode, and the other options the
 * server offers.
 */

import type { ConfigureParams, InitializeResult, ModelInfo, ToolPolicy } from '../../client/protocol';
import type { ModelOption } from '../../common/view';
import { MODEL_CATEGORY, TOOL_POLICY_OPTION } from '../chatState';
import type { ChatCore } from './core';

const TOOL_POLICIES: readonly ToolPolicy[] = ['hybrid', 'stream', 'sync'];

function isToolPolicy(value: string): value is ToolPolicy {
  return (TOOL_POLICIES as readonly string[]).includes(value);
}

function toModelOptions(models: ModelInfo[]): ModelOption[] {
  return models.map((m) => ({ id: m.id, available: m.available, ...(m.reason ? { reason: m.reason } : {}) }));
}

export class Models {
  /** The server's default model. */
  defaultModel: string | undefined;
  /** The model chosen in the view (or the one a loaded session runs), over the setting. */
  chosenModel: string | undefined;
  /** The tool policy chosen in the view (for this and new sessions), over the setting. */
  private chosenToolPolicy: ToolPolicy | undefined;

  constructor(
    private readonly core: ChatCore,
    private readonly ensureStarted: () => Promise<void>,
  ) {}

  /** The server is ready: its models, and the model the view shows. */
  serverReady(init: InitializeResult): void {
    const parley = init._meta?.parley;
    this.defaultModel = parley?.defaultModel;
    this.core.meta({
      serverState: 'ready',
      models: toModelOptions(parley?.models ?? []),
      model: this.chosenModel ?? (this.core.host.settings().defaultModel || undefined) ?? parley?.defaultModel,
    });
  }

  /** The model and tool policy a new session asks for (undefined: the server's). */
  forNewSession(): { model: string | undefined; toolPolicy: ToolPolicy | undefined } {
    const settings = this.core.host.settings();
    return { model: this.chosenModel ?? (settings.defaultModel || undefined), toolPolicy: this.chosenToolPolicy ?? settings.toolPolicy };
  }

  async refreshModels(): Promise<ModelInfo[]> {
    await this.ensureStarted();
    const result = await this.core.requireClient().models();
    this.defaultModel = result.defaultModel ?? this.defaultModel;
    this.core.meta({ models: toModelOptions(result.models), model: this.core.state.meta.model ?? this.defaultModel });
    return result.models;
  }

  /**
   * The model for this session (from its next round) and new ones: through the model config
   * option (`session/set_config_option`) when the server offers one, else `_parley/session/configure`.
   */
  async selectModel(model: string): Promise<void> {
    this.chosenModel = model;
    const option = this.core.state.meta.configOptions.find((o) => o.category === MODEL_CATEGORY);
    await this.configureSession(option?.id, model, { model });
    this.core.meta({ model });
  }

  /**
   * Set a configuration option of the session. The tool policy (`tool_policy`) also holds
   * for new sessions, and goes through `_parley/session/configure` when the server offers no
   * such option; another option must be one the server offers.
   */
  async setConfigOption(configId: string, value: string): Promise<void> {
    const option = this.core.state.meta.configOptions.find((o) => o.id === configId);
    if (configId === TOOL_POLICY_OPTION) {
      const known = isToolPolicy(value);
      if (!known && !option) {
        throw new Error(`Unknown tool policy: ${value}`);
      }
      if (known) {
        this.chosenToolPolicy = value;
      }
      await this.configureSession(option?.id, value, known ? { toolPolicy: value } : undefined);
      this.core.meta({ toolPolicy: value });
      return;
    }
    if (!option) {
      throw new Error(`The server offers no option ${configId} for this session.`);
    }
    await this.configureSession(option.id, value, undefined);
  }

  /**
   * Switch the open session's mode: `session/set_mode`, or the `mode` config option when the
   * server offers modes only that way. A choice the server refused leaves the mode shown as it was.
   */
  async setMode(modeId: string): Promise<void> {
    const { core } = this;
    const mode = core.state.meta.mode;
    const sessionId = core.state.meta.sessionId;
    if (!mode || !sessionId) {
      throw new Error('The server offers no modes for this session.');
    }
    if (!mode.modes.some((m) => m.id === modeId)) {
      throw new Error(`Unknown mode: ${modeId}`);
    }
    try {
      if (mode.via.method === 'config_option') {
        await this.configureSession(mode.via.configId, modeId, undefined);
        return;
      }
      await core.requireClient().setMode(sessionId, modeId);
      if (core.state.meta.sessionId === sessionId) {
        // As the server's `current_mode_update` will say (it may come before or after the answer).
        core.dispatch({ type: 'update', update: { sessionUpdate: 'current_mode_update', currentModeId: modeId } });
      }
    } catch (err) {
      core.meta({ mode: core.state.meta.mode && { ...core.state.meta.mode } }); // the picker shows the mode again
      throw err;
    }
  }

  /** Applies a setting to the open session: by its config option if any, else by `configure`. */
  private async configureSession(
    configId: string | undefined,
    value: string,
    fallback: Omit<ConfigureParams, 'sessionId'> | undefined,
  ): Promise<void> {
    const { core } = this;
    const sessionId = core.state.meta.sessionId;
    if (!sessionId || !core.client?.running) {
      return; // no session open: the model and the tool policy go with the next session/new
    }
    if (configId) {
      const result = await core.client.setConfigOption(sessionId, configId, value);
      if (core.state.meta.sessionId === sessionId) {
        core.dispatch({ type: 'configOptions', options: result.configOptions });
      }
    } else if (fallback) {
      await core.client.configure({ sessionId, ...fallback });
    }
  }
}
