/**
 * The workspace's own `.venv/bin/parley` runs only once the user approved that very file
 * (docs/security.md, "The server the editor starts"), with real files in a temp dir: not
 * approved, approved, rewritten since, replaced by a new file with the same bytes (a new
 * inode), untrusted; the log's reason; and what globalState gives back, however malformed.
 */

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';

import fc from 'fast-check';

import { locateServer, locationReason, venvExecutable } from '../src/core/serverLocation';
import { type ApprovedServers, approvalState, fileIdentity, readApprovals, withApproval } from '../src/core/workspaceServerApproval';

const base = fs.mkdtempSync(path.join(os.tmpdir(), 'parley-approval-test-'));
after(() => fs.rmSync(base, { recursive: true, force: true }));

function script(file: string, body: string): string {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return file;
}

let n = 0;
/** A trusted workspace with a `.venv/bin/parley`, a `parley` on a PATH of its own. */
function setup() {
  const root = path.join(base, `case-${++n}`);
  const workspace = path.join(root, 'workspace');
  const planted = script(venvExecutable(path.join(workspace, '.venv'), 'parley'), 'echo planted');
  const pathDir = path.join(root, 'path');
  const onPath = script(path.join(pathDir, 'parley'), 'exit 0');
  const where = (approved: ApprovedServers, trusted = true) =>
    locateServer({ configured: 'parley', workspaceRoot: workspace, trusted, approved, pathEnv: pathDir });
  return { root, workspace, planted, onPath, pathDir, where };
}

/** A whole-second mtime, which utimes can put back exactly. */
const WHEN = new Date('2026-01-01T00:00:00Z');

async function approve(file: string, approved: ApprovedServers = {}): Promise<ApprovedServers> {
  fs.utimesSync(file, WHEN, WHEN);
  const identity = await fileIdentity(file);
  assert.ok(identity, 'the file has an identity');
  return withApproval(approved, file, identity);
}

describe("the workspace's own parley, only once approved", () => {
  it('not approved: the PATH one runs, the workspace one passed over and named', () => {
    const { planted, onPath, where } = setup();
    const location = where({});
    assert.deepEqual(location, { command: onPath, source: 'path', passedOver: { file: planted, state: 'unapproved' } });
    assert.equal(
      locationReason(location),
      `Running the Parley server ${onPath} from the PATH: the workspace's ${planted} is not one you approved, so it is not run.`,
    );
  });

  it('approved: that file runs, as before', async () => {
    const { planted, where } = setup();
    const location = where(await approve(planted));
    assert.deepEqual(location, { command: planted, source: 'workspace' });
    assert.match(locationReason(location), /from the workspace's own \.venv, approved by you\.$/);
  });

  it('another path approved is not this one', async () => {
    const { planted, where } = setup();
    const other = setup();
    assert.equal(where(await approve(other.planted)).passedOver?.file, planted);
  });

  it('rewritten since approval (other bytes; or the same size with the mtime put back): changed', async () => {
    const { planted, onPath, where } = setup();
    const approved = await approve(planted);
    fs.writeFileSync(planted, '#!/bin/sh\necho evil!!!\n'); // same length as the approved script
    fs.utimesSync(planted, WHEN, WHEN);
    const now = fs.statSync(planted, { bigint: true });
    const { size, ino, mtimeNs } = approved[planted];
    assert.deepEqual([Number(now.size), now.ino.toString(), now.mtimeNs.toString()], [size, ino, mtimeNs], 'only the bytes differ');
    assert.equal(approvalState(planted, approved), 'changed');
    assert.deepEqual(where(approved), { command: onPath, source: 'path', passedOver: { file: planted, state: 'changed' } });
    assert.match(locationReason(where(approved)), /has changed since you approved it, so it is not run\.$/);
  });

  it('a new file at the path with the same bytes and mtime (a new inode): changed', async () => {
    const { planted, where } = setup();
    const approved = await approve(planted);
    const replacement = `${planted}.new`;
    fs.copyFileSync(planted, replacement);
    fs.utimesSync(replacement, WHEN, WHEN);
    fs.renameSync(replacement, planted);
    const now = fs.statSync(planted, { bigint: true });
    assert.notEqual(now.ino.toString(), approved[planted].ino);
    assert.equal(now.mtimeNs.toString(), approved[planted].mtimeNs, 'only the inode differs');
    assert.equal(approvalState(planted, approved), 'changed');
    assert.equal(where(approved).source, 'path');
  });

  it('touched (same bytes, same inode, new mtime): changed', async () => {
    const { planted, where } = setup();
    const approved = await approve(planted);
    const later = new Date(Date.now() + 5000);
    fs.utimesSync(planted, later, later);
    assert.equal(where(approved).passedOver?.state, 'changed');
  });

  it('an untrusted workspace: its parley neither runs nor is asked about, approved or not', async () => {
    const { planted, onPath, where } = setup();
    assert.deepEqual(where({}, false), { command: onPath, source: 'path' });
    assert.deepEqual(where(await approve(planted), false), { command: onPath, source: 'path' });
  });

  it('nothing else installed: missing, and still passed over', () => {
    const { planted, workspace } = setup();
    const location = locateServer({ configured: 'parley', workspaceRoot: workspace, trusted: true, approved: {}, pathEnv: '' });
    assert.deepEqual(location, { command: 'parley', source: 'missing', passedOver: { file: planted, state: 'unapproved' } });
  });

  it('a file gone or unreadable has no identity; a deleted approved file is not approved', async () => {
    const { planted } = setup();
    const approved = await approve(planted);
    fs.rmSync(planted);
    assert.equal(await fileIdentity(planted), undefined);
    assert.equal(approvalState(planted, approved), 'changed');
  });
});

describe('approvals read back from globalState', () => {
  it('keeps well-formed records only', async () => {
    const { planted } = setup();
    const approved = await approve(planted);
    assert.deepEqual(readApprovals(JSON.parse(JSON.stringify(approved))), approved);
    assert.deepEqual(readApprovals({ [planted]: { ...approved[planted], ino: 5 } }), {});
    for (const junk of [undefined, null, 3, 'x', [], [approved[planted]]]) {
      assert.deepEqual(readApprovals(junk), {});
    }
  });

  it('property: any stored value reads back without throwing, to records that approve nothing they do not name', () => {
    const { planted } = setup();
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue(), fc.dictionary(fc.string(), fc.anything()), fc.object()), (stored) => {
        const approvals = readApprovals(stored);
        for (const [file, r] of Object.entries(approvals)) {
          assert.equal(typeof r.sha256, 'string');
          assert.equal(typeof r.ino, 'string');
          assert.ok(Object.hasOwn(stored as object, file));
        }
        // Records made up by chance never match a real file.
        assert.notEqual(approvalState(planted, approvals), 'approved');
      }),
      { numRuns: 300 },
    );
  });
});
