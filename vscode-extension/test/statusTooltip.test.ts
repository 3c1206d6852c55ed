/** The status bar item's tooltip: the session's cost, split by kind of token. */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { costBreakdownText, statusTooltipMarkdown } from '../src/core/statusTooltip';
import { initialState } from '../src/core/chatState';

describe('status bar tooltip', () => {
  const split = { uncachedInput: 0.0123, cacheReads: 0.0004, cacheWrites: 0, output: 1.5, currency: 'USD' };

  it('names the parts of a cost split that are not zero, with formatCost', () => {
    assert.equal(costBreakdownText(split), 'input $0.0123, cache reads $0.0004, output $1.50');
    assert.equal(costBreakdownText({ ...split, uncachedInput: 0, cacheReads: 0, output: 0 }), '');
  });

  it("shows the session's cost with its split, and the last turn's", () => {
    const meta = initialState().meta;
    const usage = {
      ...meta.usage,
      sessionTokens: 1500,
      inputTokens: 1200,
      outputTokens: 300,
      cost: { amount: 1.5127, currency: 'USD' },
      costBreakdown: split,
      lastTurn: { costBreakdown: { ...split, uncachedInput: 0.002, cacheReads: 0, output: 0.01 } },
    };
    const tip = statusTooltipMarkdown({ ...meta, model: 'openai:a', usage }).split('\n\n');
    assert.ok(tip.includes('Cost: $1.51 USD (input $0.0123, cache reads $0.0004, output $1.50)'), tip.join('\n'));
    assert.ok(tip.includes('Last turn: input $0.0020, output $0.0100'), tip.join('\n'));
    assert.ok(tip.includes('Session tokens: 1500 (input 1200, output 300)'));
  });

  it('says "unknown" and no split when the cost is not known', () => {
    const meta = initialState().meta;
    const tip = statusTooltipMarkdown({ ...meta, usage: { ...meta.usage, cost: null } });
    assert.match(tip, /Cost: unknown$/m);
    assert.doesNotMatch(tip, /Last turn|input \$/);
  });
});
