/**
 * "Open diff" against a stand-in `vscode`: VS Code's diff view between the file as it is in
 * the editor now and the proposal, a virtual document whose text is the whole proposed file.
 */

import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';

import { fileNotFound } from '../src/core/fileAccess';
import { type StubUri, VscodeStub } from './vscodeStub';

const ROOT = '/work/space';

interface DiffView {
  open(edit: { toolCallId: string; file: string; oldText: string | null; newText: string }): Promise<void>;
  provideTextDocumentContent(uri: unknown): string;
}

describe('the diff view of a proposed edit (VS Code)', () => {
  const stub = new VscodeStub();
  const files = new Map<string, string>();
  let view: DiffView;
  let scheme: string;

  before(async () => {
    stub.install();
    stub.workspaceRoot = ROOT;
    const mod = await import('../src/extension/diffView');
    scheme = mod.PROPOSED_SCHEME;
    view = new mod.ProposedEditDocuments({
      read: (f) => (files.has(f) ? Promise.resolve(files.get(f)!) : Promise.reject(fileNotFound(f))),
      write: () => Promise.reject(new Error('no writes')),
    });
  });

  const lastDiff = () => {
    const call = stub.executed.filter((e) => e.id === 'vscode.diff').pop();
    assert.ok(call, 'vscode.diff was run');
    const [left, right, title] = call.args as [StubUri, StubUri, string];
    return { left, right, title };
  };

  it('compares the file now with the file as the edit leaves it', async () => {
    files.set(`${ROOT}/app.py`, 'a = 1\nb = 2  # unsaved\n');
    await view.open({ toolCallId: 'c1', file: `${ROOT}/app.py`, oldText: 'b = 2  # unsaved\n', newText: 'b = 3\n' });
    const { left, right, title } = lastDiff();
    assert.equal(left.scheme, 'file');
    assert.equal(left.fsPath, `${ROOT}/app.py`);
    assert.equal(right.scheme, scheme);
    assert.equal(view.provideTextDocumentContent(right), 'a = 1\nb = 3\n');
    assert.match(title, /app\.py ↔ Parley's edit/);
  });

  it('shows a new file against an empty side', async () => {
    await view.open({ toolCallId: 'c2', file: `${ROOT}/pkg/new.py`, oldText: null, newText: 'X = 1\n' });
    const { left, right, title } = lastDiff();
    assert.equal(left.scheme, scheme);
    assert.equal(view.provideTextDocumentContent(left), '');
    assert.equal(view.provideTextDocumentContent(right), 'X = 1\n');
    assert.notEqual(left.toString(), right.toString());
    assert.match(title, /new\.py \(new file/);
  });
});
