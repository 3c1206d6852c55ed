/**
 * The turn: a prompt sent with its attachments, the turn's end (its number, the files it
 * edited), an error shown as a card (Retry for a provider's failure), a stop (Retry on its
 * notice), and Retry itself: a cut-off turn is replaced (docs/protocol.md, `session/prompt`, Retry).
 */

import { ServerExitedError, describeError } from '../../client/client';
import { type ContentBlock, type PromptResult, type ResourceBlock, promptUsage } from '../../client/protocol';
import { INTERNAL_ERROR } from '../../client/protocol';
import { PROVIDER_ERROR } from '../../common/display';

/** The errors that end a turn that ran (a provider's failure, Parley's own): Retry replaces it. */
const TURN_ERRORS = [PROVIDER_ERROR, INTERNAL_ERROR];
import type { ContextItem } from '../../common/view';
import type { ChatCore } from './core';
import type { Permissions } from './permissions';
import type { Sessions } from './sessions';

/** What the chat says when the server kept the cut-off turn a Retry asked it to replace. */
export const RETRY_KEPT_TEXT = 'The earlier attempt is kept: the session changed after it (in another window).';

/** The last prompt of the session, as sent: what Retry sends again. */
interface SentPrompt {
  text: string;
  items: ContextItem[];
  blocks: ContentBlock[];
  /** Its turn was cut off: stopped, or answered with an error. Retry replaces it then. */
  cutOff: boolean;
}

/** The JSON-RPC error code of `err`, if it is a JSON-RPC error. */
function errorCode(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

export class Turn {
  private contextBlocks: ResourceBlock[] = [];
  /** The last prompt sent in this session. */
  private lastPrompt: SentPrompt | undefined;

  constructor(
    private readonly core: ChatCore,
    private readonly sessions: Sessions,
    private readonly permissions: Permissions,
    /** Called with the stop reason (or `error`) when a turn ends. */
    private readonly ended: (stopReason: string) => void,
  ) {}

  /** Another session is shown: its last prompt is not this one. */
  forgetLastPrompt(): void {
    this.lastPrompt = undefined;
  }

  /** Something was added to the session after its last turn (an undo): a Retry now is a new turn. */
  keepLastTurn(): void {
    if (this.lastPrompt) {
      this.lastPrompt = { ...this.lastPrompt, cutOff: false };
    }
  }

  addContext(item: ContextItem, block: ResourceBlock): void {
    this.contextBlocks = [...this.contextBlocks, block];
    this.core.meta({ context: [...this.core.state.meta.context, item] });
  }

  removeContext(index: number): void {
    this.contextBlocks = this.contextBlocks.filter((_, i) => i !== index);
    this.core.meta({ context: this.core.state.meta.context.filter((_, i) => i !== index) });
  }

  /**
   * Send a prompt with the pending context (and `extra` blocks); resolves when the turn ends.
   * Errors are shown in the view and also rethrown.
   */
  async send(text: string, extra: { items: ContextItem[]; blocks: ResourceBlock[] } = { items: [], blocks: [] }): Promise<string> {
    if (this.core.state.meta.busy) {
      throw new Error('A turn is already running; stop it first.');
    }
    const sessionId = await this.sessions.ensureSession();
    const items = [...this.core.state.meta.context, ...extra.items];
    const blocks: ContentBlock[] = [...this.contextBlocks, ...extra.blocks];
    if (text.trim()) {
      blocks.unshift({ type: 'text', text });
    }
    this.contextBlocks = [];
    return this.run(sessionId, text, items, blocks);
  }

  /**
   * Send the last prompt of this session again, as it was sent (its text and attachments):
   * the Retry of an error card (a provider's failure) or of a stop. A cut-off turn is replaced:
   * it leaves the view before the prompt is shown again, and the server is asked to replace it
   * (`retry`); after a finished turn, Retry is a new turn.
   */
  async retry(): Promise<string> {
    if (this.core.state.meta.busy) {
      throw new Error('A turn is already running; stop it first.');
    }
    const last = this.lastPrompt;
    if (!last) {
      throw new Error('There is no prompt to send again in this session.');
    }
    const sessionId = await this.sessions.ensureSession();
    if (last.cutOff) {
      this.core.dispatch({ type: 'dropLastTurn' });
    }
    return this.run(sessionId, last.text, last.items, last.blocks, last.cutOff);
  }

  private async run(sessionId: string, text: string, items: ContextItem[], blocks: ContentBlock[], retry = false): Promise<string> {
    const { core } = this;
    const client = core.requireClient();
    const sent: SentPrompt = { text, items, blocks, cutOff: false };
    this.lastPrompt = sent;
    this.permissions.startTurn();
    core.dispatch({ type: 'userPrompt', text, context: items });
    core.meta({ busy: true, context: [] });
    try {
      const result = await client.prompt(sessionId, blocks, { retry });
      this.showEnd(result, sent, retry);
      this.ended(result.stopReason);
      return result.stopReason;
    } catch (err) {
      if (!(err instanceof ServerExitedError)) {
        this.showError(err, sent);
      }
      core.meta({ busy: false });
      this.ended('error');
      throw err;
    }
  }

  /** The turn's end in the view: its number and totals, a stop's Retry, a retry's answer. */
  private showEnd(result: PromptResult, sent: SentPrompt, retry: boolean): void {
    const { core } = this;
    const { session, turn } = promptUsage(result);
    // Why it stopped came as the server's notice, before the result. The session's count
    // of turns after this one is this turn's number.
    core.dispatch({
      type: 'turnEnded',
      stopReason: result.stopReason,
      turn: session?.turns || undefined,
      edited: this.permissions.writtenThisTurn(),
    });
    // The session's totals come with the result (and each usage_update): nothing to ask or add up.
    if (session) {
      core.dispatch({ type: 'usageTotals', totals: session, ...(turn ? { turn } : {}) });
    }
    if (retry) {
      this.sayIfKept(result._meta?.parley?.replaced);
    }
    if (result._meta?.parley?.kept === false) {
      core.dispatch({ type: 'dropRefusedCommand' }); // a typo, not a turn: as Emacs does
    }
    if (result.stopReason === 'cancelled') {
      sent.cutOff = true;
      core.dispatch({ type: 'offerRetry' });
    }
  }

  /** An error answer to the prompt, as a card; the turn is cut off (the server may replace it). */
  private showError(err: unknown, sent: SentPrompt): void {
    // A provider's failure, or Parley's own, ended a turn that ran: the server replaces it on
    // Retry. Any other error refused the prompt before a turn began (bad params, a busy
    // session): nothing was cut off, and sending it again as it was would fail the same way.
    const turnFailed = TURN_ERRORS.includes(errorCode(err) ?? 0);
    sent.cutOff = turnFailed;
    this.core.dispatch({ type: 'turnEnded', stopReason: 'end_turn' });
    // The card offers to send the same prompt again. Not kept by the chat: the server keeps
    // the failed turn's notice and replays it.
    const retry = turnFailed ? { label: 'Retry', message: { type: 'retry' as const } } : undefined;
    this.core.dispatch({ type: 'notice', level: 'error', text: describeError(err), ...(retry ? { action: retry } : {}) });
  }

  /** The answer to a retry: the chat says when the server kept the cut-off turn (the view no longer shows it). */
  private sayIfKept(replaced: boolean | undefined): void {
    if (replaced === false) {
      this.core.dispatch({ type: 'notice', level: 'info', text: RETRY_KEPT_TEXT });
    }
  }
}
