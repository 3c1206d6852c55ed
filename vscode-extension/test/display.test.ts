/** The display rules of docs/display.md, as `src/common/display.ts` keeps them for the host and the view. */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  escapeControls,
  formatContext,
  formatCost,
  formatTime,
  formatTokens,
  formatToolInput,
  summarizeToolResult,
} from '../src/common/display';
import { repositoryCases } from './sharedCases';

/**
 * The cases every client checks (pytest, ERT and these tests): the repository's
 * tests/display-cases.json, found from this file's place (`out/test/` when built, or `test/`).
 */
interface DisplayCases {
  formatTokens: [number, string][];
  formatCost: [number | null, string][];
  formatContext: [number, number | null, string][];
  summarizeToolResult: [string, string | null, string][];
  escapeControls: [string, boolean, string][];
  formatTime: { now: string; cases: [string, string][] };
}

function sharedCases(): DisplayCases {
  return repositoryCases<DisplayCases>('display-cases.json');
}

describe('the shared display cases (tests/display-cases.json)', () => {
  const cases = sharedCases();

  it('escapeControls: every case', () => {
    assert.ok(cases.escapeControls.length > 0);
    for (const [text, oneLine, want] of cases.escapeControls) {
      assert.equal(escapeControls(text, oneLine), want, `escapeControls(${JSON.stringify(text)}, ${oneLine})`);
    }
  });

  it('formatTokens: every case', () => {
    assert.ok(cases.formatTokens.length > 0);
    for (const [n, want] of cases.formatTokens) {
      assert.equal(formatTokens(n), want, `formatTokens(${n})`);
    }
  });

  it('formatCost: every case', () => {
    assert.ok(cases.formatCost.length > 0);
    for (const [amount, want] of cases.formatCost) {
      assert.equal(formatCost(amount), want, `formatCost(${amount})`);
    }
  });

  it('formatContext: every case', () => {
    assert.ok(cases.formatContext.length > 0);
    for (const [used, size, want] of cases.formatContext) {
      assert.equal(formatContext(used, size), want, `formatContext(${used}, ${size})`);
    }
  });

  it('summarizeToolResult: every case', () => {
    assert.ok(cases.summarizeToolResult.length > 0);
    for (const [text, error, want] of cases.summarizeToolResult) {
      assert.equal(summarizeToolResult(text, error ?? undefined), want, `summarizeToolResult(${JSON.stringify(text)}, ${JSON.stringify(error)})`);
    }
  });

  // The times are UTC: the test run sets TZ=UTC (scripts/test-vscode, npm test); under another
  // zone the local clock differs and these cases say nothing.
  it('formatTime: every case, in UTC', { skip: new Date(0).getTimezoneOffset() !== 0 ? `TZ is not UTC (${process.env.TZ ?? 'unset'})` : false }, () => {
    const now = new Date(cases.formatTime.now);
    assert.ok(cases.formatTime.cases.length > 0);
    for (const [when, want] of cases.formatTime.cases) {
      assert.equal(formatTime(when, now), want, `formatTime(${when})`);
    }
  });
});

describe('display rules', () => {
  it('formatTokens: the number, one decimal k below 10,000, whole k (cut, not rounded) below a million, then M', () => {
    const cases: [number, string][] = [
      [0, '0'],
      [950, '950'],
      [999, '999'],
      [1000, '1.0k'],
      [1234, '1.2k'],
      [9_949, '9.9k'],
      [9_960, '10.0k'],
      [12_345, '12k'],
      [999_000, '999k'],
      [999_600, '999k'],
      [1_234_567, '1.2M'],
    ];
    for (const [n, want] of cases) {
      assert.equal(formatTokens(n), want, `formatTokens(${n})`);
    }
  });

  it('formatCost: two decimals from $1, four below, $0 for zero, words for unknown', () => {
    assert.equal(formatCost({ amount: 1.254, currency: 'USD' }), '$1.25');
    assert.equal(formatCost(0.01234), '$0.0123');
    assert.equal(formatCost(0), '$0');
    assert.equal(formatCost(null), 'cost unknown');
    assert.equal(formatCost(undefined), 'cost unknown');
  });

  it('formatContext: used/window (percent) when the window is known, never /0', () => {
    assert.equal(formatContext(12_000, 200_000), 'context 12k/200k (6%)');
    assert.equal(formatContext(1264, 0), 'context 1.3k');
    assert.equal(formatContext(1264), 'context 1.3k');
  });

  it('formatToolInput: a code argument as a code block in its language, else JSON with multi-line strings as lines', () => {
    assert.equal(formatToolInput('python_eval', { code: 'x = 1\nprint(x)\n' }), '```python\nx = 1\nprint(x)\n```');
    assert.equal(formatToolInput('elisp_eval', { form: '(+ 1 2)' }), '```elisp\n(+ 1 2)\n```');
    assert.equal(formatToolInput('run_shell', { command: 'ls -la', timeout: 5 }), '```sh\nls -la\n```');
    assert.equal(formatToolInput('read_file', { path: 'a.py', startLine: 3 }), '{\n  "path": "a.py",\n  "startLine": 3\n}');
    const shown = formatToolInput('write_file', { path: 'a.py', text: 'line one\nline two' });
    assert.equal(shown, '{\n  "path": "a.py",\n  "text": |\n    line one\n    line two\n}');
    assert.doesNotMatch(shown, /\\n/, 'no \\n escapes');
    assert.equal(formatToolInput('x', {}), '{}');
  });

  it('summarizeToolResult: three meaningful lines, section labels dropped, cut at 120 with …', () => {
    assert.equal(summarizeToolResult('stdout:\nhello\n\nworld\nstderr:\n\nthird\nfourth'), 'hello\nworld\nthird');
    assert.equal(summarizeToolResult('stdout:\n\nresult:\n'), '(no output)');
    const long = 'x'.repeat(200);
    const cut = summarizeToolResult(long);
    assert.equal(cut.length, 121, 'its first 120 characters, then …');
    assert.ok(cut.endsWith('…'));
    assert.equal(summarizeToolResult('stderr:\nTraceback…', 'ZeroDivisionError: division by zero'), 'ZeroDivisionError: division by zero\nTraceback…');
  });

  it('formatTime: local clock today, month and day this year, the full date before', () => {
    const now = new Date(2026, 10, 25, 16, 0);
    assert.equal(formatTime(new Date(2026, 10, 25, 14, 5), now), '14:05');
    assert.equal(formatTime(new Date(2026, 10, 22, 9, 7), now), 'Nov 22 09:07');
    assert.equal(formatTime(new Date(2025, 10, 22, 14, 5), now), '2025-11-22 14:05');
    assert.equal(formatTime(new Date(2026, 10, 22, 14, 5).toISOString(), now), 'Nov 22 14:05', 'an ISO stamp, shown local');
    assert.equal(formatTime('not a date', now), '');
  });
});
