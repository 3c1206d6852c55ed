/**
 * One version (README.md, "Releasing"): the server's `agentInfo.version` compared with
 * the client's after `initialize` — the comparison (with fast-check over any `agentInfo` a
 * server may send), what the extension says, and the controller saying it once per server
 * version against scripted stand-in servers (`peer.ts`), not per session or restart.
 */

import assert from 'node:assert/strict';
import * as os from 'node:os';
import { describe, it } from 'node:test';

import fc from 'fast-check';

import { ChatController } from '../src/core/controller';
import { differentServerVersion, versionMismatchText } from '../src/core/serverVersion';
import { Peer, type PeerScript } from './peer';

const OWN = '0.2.0';

describe('the server version compared with the client\'s', () => {
  it('names the server\'s version only when a Parley server has another one', () => {
    const parley = (version: unknown) => ({ agentInfo: { name: 'parley', version } as { name: string; version: string } });
    assert.equal(differentServerVersion(parley('0.1.0'), OWN), '0.1.0');
    assert.equal(differentServerVersion(parley(' 0.1.0 '), OWN), '0.1.0');
    assert.equal(differentServerVersion(parley('0.2.0'), OWN), undefined, 'the same version');
    assert.equal(differentServerVersion({}, OWN), undefined, 'no agentInfo: another agent');
    assert.equal(differentServerVersion(parley(undefined), OWN), undefined, 'no version');
    assert.equal(differentServerVersion(parley(''), OWN), undefined, 'an empty version');
    assert.equal(differentServerVersion(parley(3), OWN), undefined, 'not a string');
    assert.equal(differentServerVersion({ agentInfo: { name: 'claude-code-acp', version: '0.5.1' } }, OWN), undefined, 'another agent\'s version');
    assert.equal(differentServerVersion(parley('0.1.0'), ''), undefined, 'no version of our own');
    assert.equal(differentServerVersion(undefined, OWN), undefined);
  });

  it('never throws, and names a version only when it is a non-empty string other than ours (any agentInfo)', () => {
    const version = fc.oneof(fc.constant(OWN), fc.constant(` ${OWN}\n`), fc.string(), fc.constant(''), fc.integer(), fc.constant(null));
    const agentInfo = fc.oneof(
      fc.record({ name: fc.oneof(fc.constant('parley'), fc.string()), version }, { requiredKeys: [] }),
      fc.anything(),
    );
    fc.assert(
      fc.property(fc.option(fc.record({ agentInfo }, { requiredKeys: [] })), fc.oneof(fc.constant(OWN), fc.string()), (init, own) => {
        const said = differentServerVersion(init as Parameters<typeof differentServerVersion>[0], own);
        if (said === undefined) {
          return;
        }
        const info = (init as { agentInfo: { name: unknown; version: unknown } }).agentInfo;
        assert.equal(info.name, 'parley');
        assert.equal(typeof info.version, 'string');
        assert.equal(said, (info.version as string).trim());
        assert.ok(said !== '' && said !== own.trim());
      }),
    );
  });

  it('says both versions and what to do: the button where the extension manages the server, else how to update', () => {
    assert.equal(
      versionMismatchText('0.1.0', OWN, true),
      "Parley server 0.1.0 differs from this extension's 0.2.0: install the server this extension brings (Install Parley's server).",
    );
    assert.match(versionMismatchText('0.1.0', OWN, false), /^Parley server 0\.1\.0 differs from this extension's 0\.2\.0: update the server \(uv tool upgrade parley-code/);
  });
});

describe('the controller says a server of another version once per version', () => {
  const script = (agentInfo: object | undefined): PeerScript => ({
    initialize: { result: { protocolVersion: 1, agentCapabilities: { loadSession: true }, ...(agentInfo ? { agentInfo } : {}) } },
    'session/new': { result: { sessionId: '$session' } },
  });

  async function said(agentInfo: object | undefined, fn: (ctl: ChatController) => Promise<void>): Promise<{ calls: [string, string][]; log: string[] }> {
    const peer = new Peer(script(agentInfo));
    const calls: [string, string][] = [];
    const ctl = new ChatController({
      workspaceRoot: () => os.tmpdir(),
      settings: () => ({ server: peer.server }),
      clientInfo: { name: 'parley-vscode', version: OWN },
      serverVersionDiffers: (server, own) => calls.push([server, own]),
      log: (line) => peer.log.push(line),
    });
    try {
      await fn(ctl);
    } finally {
      await ctl.dispose();
    }
    return { calls, log: peer.log };
  }

  it('once for a server of another version: not for its sessions, nor when it restarts', async () => {
    const { calls } = await said({ name: 'parley', version: '0.1.0' }, async (ctl) => {
      await ctl.newSession();
      await ctl.newSession();
      await ctl.restart();
    });
    assert.deepEqual(calls, [['0.1.0', OWN]]);
  });

  it('nothing for a server of the same version, nor for an agent that gives no version', async () => {
    assert.deepEqual((await said({ name: 'parley', version: OWN }, (ctl) => ctl.restart())).calls, []);
    assert.deepEqual((await said(undefined, (ctl) => ctl.restart())).calls, []);
    assert.deepEqual((await said({ name: 'parley' }, (ctl) => ctl.ensureStarted())).calls, []);
  });
});
