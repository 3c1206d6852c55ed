/**
 * The typed protocol: updates of a kind the contract does not list are dropped where they
 * arrive (with a log line), and requests take their params and result types from the method.
 */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ParleyClient } from '../src/client/client';
import {
  type PromptResult,
  type RestoreResult,
  type RestoredFile,
  type ResumeSessionResult,
  type SessionConfigOption,
  type SessionNotification,
  type SetConfigOptionResult,
  type SessionUpdate,
  isSessionUpdate,
  promptUsage,
} from '../src/client/protocol';
import { Peer } from './peer';

/**
 * A stand-in server (Node, vscode-jsonrpc): answers `initialize`, and on `session/new` first
 * sends an update of a kind no contract lists, then a known one. The real server never sends
 * an unknown kind, so only a scripted peer can show what the client does with one.
 */
const PEER = `
const rpc = require(${JSON.stringify(require.resolve('vscode-jsonrpc/node'))});
const conn = rpc.createMessageConnection(
  new rpc.StreamMessageReader(process.stdin),
  new rpc.StreamMessageWriter(process.stdout),
);
conn.onRequest('initialize', () => ({ protocolVersion: 1 }));
conn.onRequest('session/new', async () => {
  await conn.sendNotification('session/update', { sessionId: 's1', update: { sessionUpdate: 'hologram_chunk', text: 'hi' } });
  await conn.sendNotification('session/update', { sessionId: 's1', update: 'not an object' });
  await conn.sendNotification('session/update', { sessionId: 's1', update: { sessionUpdate: 'session_info_update', title: 'Known' } });
  return { sessionId: 's1' };
});
process.stdin.on('end', () => process.exit(0));
conn.listen();
`;

describe('session updates', () => {
  it('knows every kind the contract lists, and no other', () => {
    const kinds = [
      'agent_message_chunk',
      'agent_thought_chunk',
      'user_message_chunk',
      'tool_call',
      'tool_call_update',
      'usage_update',
      'session_info_update',
      'config_option_update',
      'available_commands_update',
    ];
    for (const kind of kinds) {
      assert.equal(isSessionUpdate({ sessionUpdate: kind }), true, kind);
    }
    for (const other of [{ sessionUpdate: 'hologram_chunk' }, { sessionUpdate: 'toString' }, { sessionUpdate: 7 }, {}, null, 'tool_call']) {
      assert.equal(isSessionUpdate(other), false, JSON.stringify(other));
    }
  });

  it('drops an update of an unknown kind where it arrives, with a log line', async () => {
    const client = new ParleyClient({ server: { command: process.execPath, args: ['-e', PEER] } });
    const updates: SessionNotification[] = [];
    const log: string[] = [];
    client.on('update', (n) => updates.push(n));
    client.on('log', (line) => log.push(line));
    await client.start();
    try {
      assert.equal(await client.newSession('/tmp'), 's1');
      for (let i = 0; i < 200 && updates.length === 0; i++) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      assert.deepEqual(updates, [{ sessionId: 's1', update: { sessionUpdate: 'session_info_update', title: 'Known' } }]);
      const ignored = log.filter((line) => line.includes('ignored a session/update'));
      assert.equal(ignored.length, 2, log.join('\n'));
      assert.match(ignored[0], /hologram_chunk/);
    } finally {
      await client.stop();
    }
  });
});

describe('usage in a prompt result', () => {
  const usage = { inputTokens: 12, outputTokens: 3, totalTokens: 15 };
  const turn = { rounds: 1, streamedRounds: 1, syncFallbacks: 0, discardedStreams: 0, toolCalls: 0, cost: null, model: 'openai:m' };
  const session = { ...usage, cost: null, turns: 1, rounds: 1 };

  it('reads a prompt result under _meta.parley', () => {
    assert.deepEqual(promptUsage({ stopReason: 'end_turn', _meta: { parley: { usage, turn, session } } }), { usage, turn, session });
    assert.deepEqual(promptUsage({ stopReason: 'end_turn', _meta: { parley: { usage } } }), { usage });
    assert.deepEqual(promptUsage({ stopReason: 'cancelled' }), {});
  });
});

describe('initialize', () => {
  it('advertises fs only with the file handlers, and answers fs requests through them', async () => {
    const peer = new Peer({
      initialize: { result: { protocolVersion: 1 } },
      'session/new': {
        requests: [
          { method: 'fs/read_text_file', params: { sessionId: 's', path: '/ws/a.py' } },
          { method: 'fs/write_text_file', params: { sessionId: 's', path: '/ws/a.py', content: 'x' } },
        ],
        result: { sessionId: '$session' },
      },
    });
    const client = peer.client({
      handlers: {
        readTextFile: (params) => Promise.resolve({ content: `text of ${params.path}` }),
        writeTextFile: () => Promise.reject(Object.assign(new Error('refused: outside'), { code: -32602 })),
      },
    });
    await client.start();
    try {
      const [init] = peer.received('initialize');
      const caps = init.params.clientCapabilities as { fs?: unknown };
      assert.deepEqual(caps.fs, { readTextFile: true, writeTextFile: true });
      await client.newSession('/ws');
      assert.deepEqual(peer.answers(), [
        { method: 'fs/read_text_file', result: { content: 'text of /ws/a.py' } },
        { method: 'fs/write_text_file', error: { code: -32602, message: 'refused: outside' } },
      ]);
    } finally {
      await client.stop();
    }
  });

  it('asks for hybrid revisions and declares the editor tools', async () => {
    const peer = new Peer({ initialize: { result: { protocolVersion: 1 } } });
    const tool = { name: 'editor_selection', description: 'd', inputSchema: { type: 'object' }, kind: 'read' as const, needsPermission: false };
    const client = peer.client({ tools: [tool] });
    await client.start();
    try {
      const [init] = peer.received('initialize');
      assert.deepEqual(init.params.clientCapabilities, { _meta: { parley: { tools: [tool], revisions: true } } });
      assert.equal(init.params.protocolVersion, 1);
    } finally {
      await client.stop();
    }
  });
});

/** Compiled, never run: `tsc` fails if a wrong use below stops being an error. */
export function typeChecks(client: ParleyClient, update: SessionUpdate): void {
  // The result type comes from the method.
  const prompted: Promise<PromptResult> = client.request('session/prompt', { sessionId: 's', prompt: [] });
  // @ts-expect-error a caller cannot choose another result type
  const wrong: Promise<{ sessionId: number }> = client.request('session/new', { cwd: '/', mcpServers: [] });
  // @ts-expect-error nor pass a result type at all
  void client.request<{ anything: true }>('_parley/models', {});
  // @ts-expect-error nor send a method the protocol does not have
  void client.request('session/hologram', {});
  // @ts-expect-error nor leave out params the method needs
  void client.request('session/prompt', { sessionId: 's' });
  // The second edition's methods are in the map too.
  const options: Promise<SetConfigOptionResult> = client.request('session/set_config_option', { sessionId: 's', configId: 'model', value: 'openai:a' });
  // @ts-expect-error set_config_option needs the option's id
  void client.request('session/set_config_option', { sessionId: 's', value: 'openai:a' });
  const resumed: Promise<ResumeSessionResult> = client.request('session/resume', { sessionId: 's', cwd: '/', mcpServers: [] });
  void client.request('session/close', { sessionId: 's' });
  // Undo turn: the restore names its turn, and answers the files it put back or removed.
  const restored: Promise<RestoreResult> = client.request('_parley/session/restore', { sessionId: 's', turn: 2 });
  // @ts-expect-error the restore needs the turn
  void client.request('_parley/session/restore', { sessionId: 's' });
  // @ts-expect-error a turn is a number
  void client.request('_parley/session/restore', { sessionId: 's', turn: 'last' });
  // @ts-expect-error a restored file was restored or removed, nothing else
  const badFile: RestoredFile = { path: '/ws/a.py', action: 'patched' };
  // @ts-expect-error the union is closed: no catch-all member
  const unknown: SessionUpdate = { sessionUpdate: 'hologram_chunk' };
  // Narrowing on the kind needs no cast.
  if (update.sessionUpdate === 'tool_call_update') {
    const status: string | null | undefined = update.status;
    void status;
  }
  // A config option is a select or a boolean, and nothing else.
  const select: SessionConfigOption = { id: 'm', name: 'M', type: 'select', currentValue: 'a', options: [{ value: 'a', name: 'A' }] };
  // @ts-expect-error a select's value is a string
  const badSelect: SessionConfigOption = { id: 'm', name: 'M', type: 'select', currentValue: true, options: [] };
  // An update's commands carry their input hint typed.
  if (update.sessionUpdate === 'available_commands_update') {
    const hint: string | undefined = update.availableCommands[0]?.input?.hint;
    void hint;
  }
  void options;
  void resumed;
  void restored;
  void badFile;
  void select;
  void badSelect;
  void prompted;
  void wrong;
  void unknown;
}
