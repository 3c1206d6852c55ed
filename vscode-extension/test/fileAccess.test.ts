/**
 * The client's file methods (core): paths confined to the workspace folder (`..`, absolute
 * paths and symlinks out refused), the lines asked for, and the editor port called with
 * what the server sent.
 */

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { INVALID_PARAMS, RESOURCE_NOT_FOUND } from '../src/client/protocol';
import { type EditorFiles, FileAccessError, WorkspaceFileAccess, confine, fileNotFound, sliceLines } from '../src/core/fileAccess';

/** An editor whose files are a map; it records the writes. */
class MapFiles implements EditorFiles {
  readonly writes: [string, string][] = [];
  constructor(readonly files: Map<string, string>) {}
  read(file: string): Promise<string> {
    const text = this.files.get(file);
    return text === undefined ? Promise.reject(fileNotFound(file)) : Promise.resolve(text);
  }
  write(file: string, content: string): Promise<void> {
    this.writes.push([file, content]);
    this.files.set(file, content);
    return Promise.resolve();
  }
}

async function refusedWith(promise: Promise<unknown>, code: number, message: RegExp): Promise<void> {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof FileAccessError, `a FileAccessError, not ${String(err)}`);
    assert.equal(err.code, code);
    assert.match(err.message, message);
    return true;
  });
}

describe('file access: confined to the workspace folder', () => {
  let base: string;
  let root: string;
  let outside: string;

  before(() => {
    base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'parley-files-')));
    root = path.join(base, 'ws');
    outside = path.join(base, 'outside');
    fs.mkdirSync(path.join(root, 'pkg'), { recursive: true });
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(root, 'pkg', 'a.py'), 'x = 1\n');
    fs.writeFileSync(path.join(outside, 'secret.txt'), 'secret\n');
    fs.symlinkSync(outside, path.join(root, 'link-out'));
    fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(root, 'secret-link.txt'));
    fs.symlinkSync(path.join(root, 'pkg'), path.join(root, 'link-in'));
  });

  after(() => fs.rmSync(base, { recursive: true, force: true }));

  it('takes absolute and relative paths inside, existing or not', async () => {
    assert.equal(await confine(root, path.join(root, 'pkg', 'a.py')), path.join(root, 'pkg', 'a.py'));
    assert.equal(await confine(root, 'pkg/a.py'), path.join(root, 'pkg', 'a.py'));
    assert.equal(await confine(root, 'pkg/../pkg/new.py'), path.join(root, 'pkg', 'new.py'));
    assert.equal(await confine(root, 'new/deeper/file.py'), path.join(root, 'new', 'deeper', 'file.py'), 'folders to be created');
    assert.equal(await confine(root, 'link-in/a.py'), path.join(root, 'link-in', 'a.py'), 'a symlink that stays inside');
  });

  it('refuses .., absolute paths elsewhere, the folder itself and symlinks out', async () => {
    await refusedWith(confine(root, '../outside/secret.txt'), INVALID_PARAMS, /outside the workspace folder/);
    await refusedWith(confine(root, path.join(outside, 'secret.txt')), INVALID_PARAMS, /outside the workspace folder/);
    await refusedWith(confine(root, '/etc/passwd'), INVALID_PARAMS, /outside the workspace folder/);
    await refusedWith(confine(root, root), INVALID_PARAMS, /outside the workspace folder/);
    await refusedWith(confine(root, 'link-out/secret.txt'), INVALID_PARAMS, /symbolic link/);
    await refusedWith(confine(root, 'link-out/new.txt'), INVALID_PARAMS, /symbolic link/);
    await refusedWith(confine(root, 'secret-link.txt'), INVALID_PARAMS, /symbolic link/);
    await refusedWith(confine(root, ''), INVALID_PARAMS, /path is needed/);
    await refusedWith(confine(root, 42), INVALID_PARAMS, /path is needed/);
  });

  it('reads through the editor port, the lines asked for; writes with the content', async () => {
    const file = path.join(root, 'pkg', 'a.py');
    const editor = new MapFiles(new Map([[file, 'one\ntwo\nthree\nfour']]));
    const access = new WorkspaceFileAccess(() => root, editor);
    assert.deepEqual(await access.readTextFile({ sessionId: 's', path: file }), { content: 'one\ntwo\nthree\nfour' });
    assert.deepEqual(await access.readTextFile({ sessionId: 's', path: file, line: 2, limit: 2 }), { content: 'two\nthree\n' });
    assert.deepEqual(await access.readTextFile({ sessionId: 's', path: 'pkg/a.py', line: 3, limit: null }), { content: 'three\nfour' });
    await refusedWith(access.readTextFile({ sessionId: 's', path: 'pkg/missing.py' }), RESOURCE_NOT_FOUND, /No such file/);
    await refusedWith(access.readTextFile({ sessionId: 's', path: '../outside/secret.txt' }), INVALID_PARAMS, /outside/);

    assert.deepEqual(await access.writeTextFile({ sessionId: 's', path: 'new/b.py', content: 'y = 2\n' }), {});
    await refusedWith(access.writeTextFile({ sessionId: 's', path: 'link-out/x.py', content: 'no' }), INVALID_PARAMS, /symbolic link/);
    // Not even a link that stays inside: the server sends the place it resolved, so a link on
    // the way is one swapped in since (`conf -> .git` would write .git/config).
    await refusedWith(access.writeTextFile({ sessionId: 's', path: 'link-in/a.py', content: 'no' }), INVALID_PARAMS, /through a symbolic link: not written/);
    assert.equal(fs.readFileSync(path.join(root, 'pkg', 'a.py'), 'utf8'), 'x = 1\n');
    assert.deepEqual(editor.writes, [[path.join(root, 'new', 'b.py'), 'y = 2\n']], 'nothing written outside');
    assert.equal(fs.existsSync(path.join(outside, 'x.py')), false);
  });
});

describe('file access: lines', () => {
  it('slices by 1-based line and limit, keeping the line endings', () => {
    const text = 'a\r\nb\nc\n';
    assert.equal(sliceLines(text), text);
    assert.equal(sliceLines(text, 1, 1), 'a\r\n');
    assert.equal(sliceLines(text, 2), 'b\nc\n');
    assert.equal(sliceLines(text, undefined, 2), 'a\r\nb\n');
    assert.equal(sliceLines(text, 9, 2), '');
    assert.equal(sliceLines(text, 1, 0), '');
    assert.throws(() => sliceLines(text, 0), /line must be/);
    assert.throws(() => sliceLines(text, 1, -1), /limit must be/);
  });
});
