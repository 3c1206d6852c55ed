/** The editor tools (selection, open editors, diagnostics) against a stand-in `vscode`. */

import assert from 'node:assert/strict';
import * as path from 'node:path';
import { before, describe, it } from 'node:test';

import type { EditorCallToolResult } from '../src/client/protocol';
import { StubUri, VscodeStub } from './vscodeStub';

const ROOT = '/work/space';



describe('editor tools', () => {
  const stub = new VscodeStub();
  let run: (name: string, args?: Record<string, unknown>) => Promise<EditorCallToolResult>;

  before(async () => {
    stub.install();
    stub.workspaceRoot = ROOT;
    const { EditorTools } = (await import('../src/extension/editorTools'));
    const tools = new EditorTools(() => ROOT);
    run = (name, args = {}) => tools.run({ sessionId: 's', toolCallId: 'c', name, arguments: args });
  });

  function range(a: number, b: number, c: number, d: number): unknown {
    const Range = stub.exports.Range as new (a: number, b: number, c: number, d: number) => unknown;
    return new Range(a, b, c, d);
  }

  function setEditor(lines: string[], sel: [number, number, number, number]): void {
    const uri = StubUri.file(path.join(ROOT, 'pkg', 'geometry.py'));
    const selection = range(...sel) as { start: { line: number; character: number }; end: { line: number; character: number } };
    const window = stub.exports.window as Record<string, unknown>;
    window.activeTextEditor = {
      selection: Object.assign(selection, { active: selection.end }),
      document: {
        uri,
        languageId: 'python',
        isDirty: true,
        isClosed: false,
        lineAt: (line: number) => ({ range: range(line, 0, line, lines[line].length) }),
        getText: (r: { start: { line: number; character: number }; end: { line: number; character: number } }) => {
          const out: string[] = [];
          for (let l = r.start.line; l <= r.end.line; l++) {
            const from = l === r.start.line ? r.start.character : 0;
            const to = l === r.end.line ? r.end.character : lines[l].length;
            out.push(lines[l].slice(from, to));
          }
          return out.join('\n');
        },
      },
    };
  }

  it('editor_selection: the selected text with its file and range', async () => {
    setEditor(['def area(w, h):', '    return w * h', ''], [0, 4, 1, 16]);
    const r = await run('editor_selection');
    assert.equal(r.isError, undefined);
    assert.match(r.content, /^file: pkg\/geometry\.py \(unsaved changes\)$/m);
    assert.match(r.content, /^language: python$/m);
    assert.match(r.content, /^selection: line 1, column 5 to line 2, column 17$/m);
    assert.ok(r.content.endsWith('\n\narea(w, h):\n    return w * h'));
  });

  it('editor_selection: the line under the cursor when nothing is selected', async () => {
    setEditor(['def area(w, h):', '    return w * h'], [1, 3, 1, 3]);
    const r = await run('editor_selection');
    assert.match(r.content, /line under the cursor/);
    assert.ok(r.content.endsWith('\n\n    return w * h'));
  });

  it('open_editors: tabs with active and unsaved flags', async () => {
    const TabInputText = stub.exports.TabInputText as new (u: StubUri) => unknown;
    const window = stub.exports.window as { tabGroups: { all: unknown[] } };
    window.tabGroups.all = [
      {
        isActive: true,
        tabs: [
          { input: new TabInputText(StubUri.file(`${ROOT}/a.py`)), isActive: true, isDirty: false, isPinned: false },
          { input: new TabInputText(StubUri.file('/elsewhere/b.py')), isActive: false, isDirty: true, isPinned: false },
          { input: { kind: 'webview' }, isActive: false, isDirty: false, isPinned: false },
        ],
      },
    ];
    const r = await run('open_editors');
    assert.equal(r.content, 'a.py (active)\n/elsewhere/b.py (unsaved changes)');
  });

  it('diagnostics: by severity, for the workspace or one file', async () => {
    const diag = (line: number, severity: number, message: string) => ({
      range: range(line, 2, line, 5),
      severity,
      message,
      source: 'pyright',
      code: 'reportUndefinedVariable',
    });
    stub.diagnostics = [
      [StubUri.file(`${ROOT}/a.py`), [diag(3, 0, 'x is not defined'), diag(9, 2, 'just so you know')]],
      [StubUri.file(`${ROOT}/b.py`), [diag(0, 1, 'unused import')]],
    ];
    const all = await run('diagnostics');
    assert.equal(
      all.content,
      'a.py:4:3 error pyright(reportUndefinedVariable): x is not defined\n' +
        'b.py:1:3 warning pyright(reportUndefinedVariable): unused import',
    );
    const one = await run('diagnostics', { path: 'a.py', severity: 'information' });
    assert.equal(one.content.split('\n').length, 2);
    assert.equal((await run('diagnostics', { path: 'c.py' })).content, 'No problems reported.');
    assert.equal((await run('diagnostics', { severity: 'loud' })).isError, true);
    assert.equal((await run('nope')).isError, true);
  });
});
