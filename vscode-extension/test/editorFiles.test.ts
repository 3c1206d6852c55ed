/**
 * The VS Code side of `fs/read_text_file` and `fs/write_text_file` against a stand-in
 * `vscode`: an open document's unsaved text is what is read; a write is one workspace edit
 * (the editor's undo takes it back in one step), then saved; a new file is created.
 */

import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';

import { RESOURCE_NOT_FOUND } from '../src/client/protocol';
import type { EditorFiles } from '../src/core/fileAccess';
import { StubUri, VscodeStub } from './vscodeStub';

const ROOT = '/work/space';

describe('editor files (VS Code)', () => {
  const stub = new VscodeStub();
  let files: EditorFiles;

  before(async () => {
    stub.install();
    stub.workspaceRoot = ROOT;
    const { VscodeEditorFiles } = await import('../src/extension/editorFiles');
    files = new VscodeEditorFiles();
  });

  it('reads an open document as it is in the editor, unsaved changes included; else the disk', async () => {
    stub.disk.set(`${ROOT}/a.py`, 'on disk\n');
    stub.disk.set(`${ROOT}/b.py`, 'b on disk\n');
    const doc = stub.openDocument(`${ROOT}/a.py`);
    doc.text = 'in the editor\n';
    doc.isDirty = true;
    assert.equal(await files.read(`${ROOT}/a.py`), 'in the editor\n');
    assert.equal(await files.read(`${ROOT}/b.py`), 'b on disk\n');
    await assert.rejects(files.read(`${ROOT}/none.py`), (err: { code?: number }) => err.code === RESOURCE_NOT_FOUND);
  });

  it('writes an existing file as one workspace edit over its whole text, then saves it', async () => {
    stub.disk.set(`${ROOT}/c.py`, 'def f():\n    return 1\n');
    const before = stub.appliedEdits.length;
    await files.write(`${ROOT}/c.py`, 'def f():\n    return 2\n');
    const edits = stub.appliedEdits.slice(before);
    assert.equal(edits.length, 1, 'one workspace edit');
    assert.deepEqual(
      edits[0].map((o) => o.op),
      ['replace'],
    );
    const doc = stub.documents.find((d) => d.uri.fsPath === `${ROOT}/c.py`)!;
    assert.equal(doc.text, 'def f():\n    return 2\n');
    assert.equal(doc.edits, 1, 'one step of the editor\'s undo');
    assert.equal(doc.isDirty, false, 'saved');
    assert.equal(stub.disk.get(`${ROOT}/c.py`), 'def f():\n    return 2\n');
  });

  it('writes into an open document with unsaved changes (its whole text replaced)', async () => {
    const doc = stub.openDocument(`${ROOT}/a.py`);
    doc.text = 'line 1\nline 2 edited by the user\n';
    doc.isDirty = true;
    await files.write(`${ROOT}/a.py`, 'line 1\nline 2 edited by the user\nline 3 by Parley\n');
    assert.equal(doc.text, 'line 1\nline 2 edited by the user\nline 3 by Parley\n');
    assert.equal(stub.disk.get(`${ROOT}/a.py`), doc.text);
  });

  it('creates a missing file (and says so in the edit), with its content', async () => {
    const before = stub.appliedEdits.length;
    await files.write(`${ROOT}/pkg/new/mod.py`, 'X = 1\n');
    const [edit] = stub.appliedEdits.slice(before);
    assert.deepEqual(
      edit.map((o) => o.op),
      ['createFile', 'insert'],
    );
    const create = edit[0];
    assert.ok(create.op === 'createFile' && create.uri instanceof StubUri && create.uri.fsPath === `${ROOT}/pkg/new/mod.py`);
    assert.equal(stub.disk.get(`${ROOT}/pkg/new/mod.py`), 'X = 1\n');
  });

  it('fails clearly when VS Code does not apply the edit', async () => {
    const workspace = stub.exports.workspace as { applyEdit: (e: unknown) => Promise<boolean> };
    const original = workspace.applyEdit;
    workspace.applyEdit = () => Promise.resolve(false);
    try {
      await assert.rejects(files.write(`${ROOT}/c.py`, 'nope\n'), /did not apply the edit/);
    } finally {
      workspace.applyEdit = original;
    }
    assert.equal(stub.disk.get(`${ROOT}/c.py`), 'def f():\n    return 2\n');
  });
});
