/**
 * The protocol client and the chat controller against the real `parley serve` and the fake
 * LLM: streaming, a tool round with permission, an editor tool, cancel, the model list,
 * session reload, and the server dying and being restarted.
 */

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';

import { ResponseError } from 'vscode-jsonrpc/node';

import { type ParleyClient, ServerExitedError, describeError } from '../src/client/client';
import { EDITOR_TOOL_SPECS } from '../src/client/editorToolSpecs';
import {
  type EditorCallToolParams,
  PROVIDER_ERROR,
  type RequestPermissionParams,
  type RequestPermissionResult,
  promptUsage,
} from '../src/client/protocol';
import { ChatController, type KeptNotice, type NoticeKeeper } from '../src/core/controller';
import { initialState, reduce } from '../src/core/chatState';
import { FakeLLM, MODEL, PARLEY, Updates, delay, makeClient, serverEnv, serverUnavailable, tempDirs } from './harness';

let skipReason: string | undefined;
let fake: FakeLLM | undefined;

function skipIfNoServer(t: TestContext): boolean {
  if (skipReason) {
    t.skip(skipReason);
    return true;
  }
  return false;
}

const LONG_TEXT = 'This answer streams slowly so that it can be stopped half way. '.repeat(20);

describe('protocol client against parley serve', () => {
  let dirs: ReturnType<typeof tempDirs>;
  let client: ParleyClient;
  let updates: Updates;
  let permissionRequests: RequestPermissionParams[] = [];
  let permissionAnswer: (p: RequestPermissionParams, signal: AbortSignal) => Promise<RequestPermissionResult>;
  const editorCalls: EditorCallToolParams[] = [];

  before(async () => {
    skipReason = await serverUnavailable();
    if (skipReason) {
      console.log(`server tests skipped: ${skipReason}`);
      return;
    }
    fake = await FakeLLM.start();
    dirs = tempDirs();
    client = makeClient(fake, dirs, {
      tools: EDITOR_TOOL_SPECS,
      handlers: {
        requestPermission: (p, signal) => {
          permissionRequests.push(p);
          return permissionAnswer(p, signal);
        },
        callEditorTool: (p) => {
          editorCalls.push(p);
          return Promise.resolve({ content: 'file: geometry.py\nselection: line 3\n\n    return width * height' });
        },
      },
    });
    updates = new Updates(client);
    const init = await client.start();
    assert.equal(init.protocolVersion, 1);
  });

  after(async () => {
    await client?.stop();
    await fake?.stop();
    fake = undefined;
    dirs?.cleanup();
  });

  it('initializes and lists the models', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    const init = client.initializeResult!;
    assert.equal(init.agentInfo?.name, 'parley');
    assert.equal(init.agentCapabilities?.loadSession, true);
    const models = await client.models();
    assert.ok(Array.isArray(models.models) && models.models.length > 0, 'some models');
    const mini = models.models.find((m) => m.id === MODEL);
    assert.ok(mini, `${MODEL} is listed: ${JSON.stringify(models.models.map((m) => m.id))}`);
    assert.equal(mini.available, true);
    assert.equal(mini.provider, 'openai');
    for (const m of models.models) {
      assert.equal(typeof m.available, 'boolean');
      if (!m.available) {
        assert.ok(m.reason, `${m.id} says why it is unavailable`);
      }
    }
    assert.equal(models.defaultModel, MODEL);
    assert.deepEqual(init._meta?.parley?.defaultModel, MODEL);
  });

  it('streams an answer as agent_message_chunk updates', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    const text = 'Hello! The area of a 3 by 4 rectangle is 12.';
    await fake!.script([{ text, thinking: 'Width times height.', chunk_size: 5, usage: [120, 30] }]);
    updates.clear();
    const sessionId = await client.newSession(dirs.workspace);
    const result = await client.prompt(sessionId, 'What is the area of a 3x4 rectangle?');
    assert.equal(result.stopReason, 'end_turn');
    const chunks = updates.of('agent_message_chunk', sessionId);
    assert.ok(chunks.length >= 5, `streamed in pieces (${chunks.length} chunks)`);
    assert.equal(updates.text('agent_message_chunk', sessionId), text);
    assert.equal(updates.text('agent_thought_chunk', sessionId), 'Width times height.');
    const { usage: turnUsage, turn } = promptUsage(result);
    assert.equal(turnUsage?.inputTokens, 120);
    assert.equal(turnUsage?.outputTokens, 30);
    assert.equal(turnUsage?.totalTokens, 150);
    assert.equal(turn?.rounds, 1);

    // The view state the reducer builds from these updates.
    let state = initialState();
    for (const n of updates.all.filter((u) => u.sessionId === sessionId)) {
      state = reduce(state, { type: 'update', update: n.update });
    }
    const kinds = state.entries.map((e) => e.kind);
    assert.deepEqual(kinds, ['thought', 'agent']);
    assert.equal(state.entries[1].kind === 'agent' && state.entries[1].text, text);
    // The session's totals from the usage_updates alone (no result, no _parley/usage).
    assert.equal(state.meta.usage.sessionTokens, 150);
    assert.equal(state.meta.usage.inputTokens, 120);
    assert.equal(state.meta.usage.outputTokens, 30);

    const usage = await client.usage(sessionId);
    assert.equal(usage.session?.inputTokens, 120);
    assert.equal(usage.session?.turns, 1);
  });

  it('runs a tool round with permission (hybrid: one stream and one synchronous call)', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    await fake!.script([
      { text: 'Let me check.', tool_calls: [{ name: 'python_eval', arguments: { code: 'print(6 * 7)' } }] },
      { text: 'It prints 42.' },
    ]);
    updates.clear();
    permissionRequests = [];
    permissionAnswer = (p) => {
      const once = p.options.find((o) => o.kind === 'allow_once');
      assert.ok(once, 'an allow_once option');
      return Promise.resolve({ outcome: { outcome: 'selected', optionId: once.optionId } });
    };
    const sessionId = await client.newSession(dirs.workspace);
    const result = await client.prompt(sessionId, 'What does print(6 * 7) print?');
    assert.equal(result.stopReason, 'end_turn');

    assert.equal(permissionRequests.length, 1);
    const asked = permissionRequests[0];
    assert.equal(asked.sessionId, sessionId);
    assert.deepEqual(
      asked.options.map((o) => o.kind).sort(),
      ['allow_always', 'allow_once', 'reject_once'],
    );
    assert.deepEqual(asked.toolCall.rawInput, { code: 'print(6 * 7)' });

    const calls = updates.of('tool_call', sessionId);
    assert.equal(calls.length, 1, 'one early tool_call');
    const toolCallId = calls[0].toolCallId;
    assert.equal(asked.toolCall.toolCallId, toolCallId, 'the permission names the announced call');
    const toolUpdates = updates.of('tool_call_update', sessionId).filter((u) => u.toolCallId === toolCallId);
    const final = toolUpdates[toolUpdates.length - 1];
    assert.equal(final.status, 'completed');
    const out = JSON.stringify(final.content ?? final.rawOutput);
    assert.match(out, /42/);
    assert.match(updates.text('agent_message_chunk', sessionId), /It prints 42\./);

    const requests = await fake!.requests();
    const kinds = requests.map((r) => `${r.reply_index}:${r.stream ? 'stream' : 'sync'}`);
    assert.deepEqual(kinds, ['0:stream', '0:sync', '1:stream']);
    assert.equal(promptUsage(result).turn?.discardedStreams, 1);
    assert.equal(promptUsage(result).turn?.toolCalls, 1);
  });

  it('applies a revision and a superseded tool call when the synchronous call answers in text', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    await fake!.script([
      {
        text: 'Let me run it',
        tool_calls: [{ name: 'python_eval', arguments: { code: '6 * 7' } }],
        sync: { text: 'No need to run anything: 6 * 7 is 42.' },
      },
    ]);
    updates.clear();
    permissionRequests = [];
    const sessionId = await client.newSession(dirs.workspace);
    const result = await client.prompt(sessionId, 'What is 6 * 7?');
    assert.equal(result.stopReason, 'end_turn');
    assert.equal(permissionRequests.length, 0, 'the superseded call was not run');
    const revisions = updates
      .of('agent_message_chunk', sessionId)
      .filter((u) => u._meta?.parley?.replaces);
    assert.equal(revisions.length, 1, 'one revision chunk');
    const streamedId = updates.of('agent_message_chunk', sessionId)[0].messageId;
    assert.equal((revisions[0]._meta as { parley: { replaces: string } }).parley.replaces, streamedId);

    let state = initialState();
    for (const n of updates.all.filter((u) => u.sessionId === sessionId)) {
      state = reduce(state, { type: 'update', update: n.update });
    }
    const shown = state.entries.map((e) =>
      e.kind === 'agent' ? `agent:${e.text}` : e.kind === 'tool' ? `tool:${e.status}:${e.superseded}` : e.kind,
    );
    assert.deepEqual(shown, ['agent:No need to run anything: 6 * 7 is 42.', 'tool:failed:true']);
  });

  it('a provider failure ends the prompt with error -32001 and its data', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    await fake!.script([{ text: 'never', fault: { kind: 'http', status: 401, times: 10 } }]);
    const sessionId = await client.newSession(dirs.workspace);
    const err = await client.prompt(sessionId, 'Hello?').then(
      () => assert.fail('the prompt should fail'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ResponseError, String(err));
    assert.equal(err.code, PROVIDER_ERROR);
    const data = err.data as { provider?: string; status?: number; type?: string; retryable?: boolean };
    assert.equal(data.provider, 'openai');
    assert.equal(data.status, 401);
    assert.equal(typeof data.type, 'string');
    assert.equal(data.retryable, false);
    assert.match(describeError(err), /\[openai 401/);
  });

  it('a rejected tool call is not run', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    await fake!.script([
      { tool_calls: [{ name: 'python_eval', arguments: { code: 'open("/tmp/parley-should-not-exist", "w")' } }] },
      { text: 'Understood, I will not run it.' },
    ]);
    updates.clear();
    permissionAnswer = (p) =>
      Promise.resolve({ outcome: { outcome: 'selected', optionId: p.options.find((o) => o.kind === 'reject_once')!.optionId } });
    const sessionId = await client.newSession(dirs.workspace);
    const result = await client.prompt(sessionId, 'Create a file.');
    assert.equal(result.stopReason, 'end_turn');
    const toolUpdates = updates.of('tool_call_update', sessionId);
    assert.ok(toolUpdates.length > 0);
    assert.notEqual(toolUpdates[toolUpdates.length - 1].status, 'completed', 'the call did not complete');
    const second = (await fake!.requests()).find((r) => r.reply_index === 1);
    assert.ok(second, 'the model was asked again');
    assert.match(JSON.stringify(second.body.messages), /reject|denied|declined|not run|refused/i);
  });

  it('calls an editor tool through _parley/editor/callTool', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    await fake!.script([{ tool_calls: [{ name: 'editor_selection', arguments: {} }] }, { text: 'You selected the return line.' }]);
    updates.clear();
    editorCalls.length = 0;
    const sessionId = await client.newSession(dirs.workspace);
    const result = await client.prompt(sessionId, 'What did I select?');
    assert.equal(result.stopReason, 'end_turn');
    assert.equal(editorCalls.length, 1);
    assert.equal(editorCalls[0].sessionId, sessionId);
    assert.equal(editorCalls[0].name, 'editor_selection');
    assert.deepEqual(editorCalls[0].arguments, {});
    assert.equal(editorCalls[0].toolCallId, updates.of('tool_call', sessionId)[0].toolCallId);
    const second = (await fake!.requests()).find((r) => r.reply_index === 1);
    assert.match(JSON.stringify(second?.body.messages), /return width \* height/);
  });

  it('cancels a streaming turn promptly', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    await fake!.script([{ text: LONG_TEXT, chunk_size: 4, pacing: { chunks_per_second: 20 } }]);
    updates.clear();
    const sessionId = await client.newSession(dirs.workspace);
    const turn = client.prompt(sessionId, 'Tell me a long story.');
    await updates.waitFor((n) => n.sessionId === sessionId && n.update.sessionUpdate === 'agent_message_chunk');
    const t0 = Date.now();
    await client.cancel(sessionId);
    const result = await turn;
    const elapsed = Date.now() - t0;
    assert.equal(result.stopReason, 'cancelled');
    assert.ok(elapsed < 1000, `cancelled in ${elapsed} ms`);
    const streamed = updates.text('agent_message_chunk', sessionId);
    assert.ok(streamed.length > 0 && streamed.length < LONG_TEXT.length, 'stopped part way');
    await delay(300);
    const requests = await fake!.requests();
    assert.ok(requests.some((r) => r.client_hung_up), 'the provider stream was closed');

    // The session goes on.
    await fake!.script([{ text: 'ok' }]);
    const again = await client.prompt(sessionId, 'Short answer this time.');
    assert.equal(again.stopReason, 'end_turn');
  });

  it('cancels while a permission prompt is open', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    await fake!.script([{ tool_calls: [{ name: 'python_eval', arguments: { code: '1 + 1' } }] }, { text: 'never' }]);
    updates.clear();
    let aborted = false;
    const asked = new Promise<void>((resolveAsked) => {
      permissionAnswer = (_p, signal) =>
        new Promise((resolve) => {
          resolveAsked();
          signal.addEventListener('abort', () => {
            aborted = true;
            resolve({ outcome: { outcome: 'cancelled' } });
          });
        });
    });
    const sessionId = await client.newSession(dirs.workspace);
    const turn = client.prompt(sessionId, 'Add one and one.');
    await asked;
    const t0 = Date.now();
    await client.cancel(sessionId);
    const result = await turn;
    assert.equal(result.stopReason, 'cancelled');
    assert.ok(Date.now() - t0 < 1000, 'promptly');
    assert.ok(aborted, 'the open prompt was told');
    const toolUpdates = updates.of('tool_call_update', sessionId);
    assert.notEqual(toolUpdates[toolUpdates.length - 1]?.status, 'completed');
  });

  it('closes a session and resumes it without a replay (session/close, session/resume)', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    const { resume, close } = client.sessionCapabilities;
    assert.deepEqual({ resume, close }, { resume: true, close: true }, 'advertised in initialize');
    await fake!.script([{ text: 'Noted.' }]);
    const sessionId = await client.newSession(dirs.workspace);
    assert.equal((await client.prompt(sessionId, 'Remember 7.')).stopReason, 'end_turn');
    await client.closeSession(sessionId);
    updates.clear();
    const resumed = await client.resumeSession(sessionId, dirs.workspace);
    assert.ok(resumed.configOptions?.some((o) => o.category === 'model'), 'the options in the resume result');
    assert.deepEqual(updates.of('user_message_chunk', sessionId), [], 'no replay');
    assert.deepEqual(updates.of('agent_message_chunk', sessionId), [], 'no replay');
    await fake!.script([{ text: 'x' }, { text: 'Still 7.' }]); // answered by the count of assistant messages so far
    assert.equal((await client.prompt(sessionId, 'What was it?')).stopReason, 'end_turn');
    assert.match(updates.text('agent_message_chunk', sessionId), /Still 7\./);
  });

  it('reloads a stored session (session/list, session/load replay)', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    await fake!.script([
      { tool_calls: [{ name: 'python_eval', arguments: { code: '2 ** 10' } }] },
      { text: 'Two to the tenth is 1024.' },
    ]);
    permissionAnswer = (p) =>
      Promise.resolve({ outcome: { outcome: 'selected', optionId: p.options.find((o) => o.kind === 'allow_once')!.optionId } });
    const sessionId = await client.newSession(dirs.workspace);
    const first = await client.prompt(sessionId, 'What is 2 ** 10?');
    assert.equal(first.stopReason, 'end_turn');

    const listed = await client.listSessions({ cwd: dirs.workspace });
    assert.ok(listed.sessions.some((s) => s.sessionId === sessionId), 'the session is listed');

    // A new server process, sharing the store: load the session.
    const dirs2 = { home: dirs.home, workspace: dirs.workspace };
    const other = makeClient(fake!, dirs2);
    const otherUpdates = new Updates(other);
    await other.start();
    try {
      const loaded = await other.loadSession(sessionId, dirs.workspace);
      assert.equal(loaded._meta?.parley?.model, MODEL);
      assert.ok(loaded._meta?.parley?.usage, 'usage in the load result');
      assert.match(otherUpdates.text('user_message_chunk', sessionId), /What is 2 \*\* 10\?/);
      assert.match(otherUpdates.text('agent_message_chunk', sessionId), /Two to the tenth is 1024\./);
      const calls = otherUpdates.of('tool_call', sessionId);
      assert.equal(calls.length, 1);
      assert.equal(calls[0].status, 'completed', 'tool_call replayed with its final status');
      assert.match(JSON.stringify(calls[0].rawOutput ?? calls[0].content), /1024/);

      // The loaded session accepts prompts.
      await fake!.script([{ text: 'unused' }, { text: 'unused' }, { text: 'Still here.' }]);
      const next = await other.prompt(sessionId, 'Are you still there?');
      assert.equal(next.stopReason, 'end_turn');
      assert.match(otherUpdates.text('agent_message_chunk', sessionId), /Still here\./);
    } finally {
      await other.stop();
    }
  });
});

describe('server death and restart', () => {
  let dirs: ReturnType<typeof tempDirs>;

  before(async () => {
    skipReason ??= await serverUnavailable();
    if (!skipReason) {
      fake = await FakeLLM.start();
    }
    dirs = tempDirs();
  });

  after(async () => {
    await fake?.stop();
    fake = undefined;
    dirs?.cleanup();
  });

  it('the client reports the death, fails the pending prompt, and restarts', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    await fake!.script([{ text: LONG_TEXT, chunk_size: 4, pacing: { chunks_per_second: 20 } }]);
    const client = makeClient(fake!, dirs);
    const updates = new Updates(client);
    await client.start();
    try {
      const sessionId = await client.newSession(dirs.workspace);
      const turn = client.prompt(sessionId, 'A long answer please.');
      await updates.waitFor((n) => n.update.sessionUpdate === 'agent_message_chunk');
      const exited = new Promise<{ expected: boolean }>((resolve) => client.once('exit', resolve));
      process.kill(client.pid!, 'SIGKILL');
      await assert.rejects(turn, ServerExitedError);
      const info = await exited;
      assert.equal(info.expected, false);
      assert.equal(client.running, false);
      await assert.rejects(client.models(), ServerExitedError);

      await client.restart();
      assert.equal(client.running, true);
      await fake!.script([{ text: 'Back again.' }]);
      const fresh = await client.newSession(dirs.workspace);
      const result = await client.prompt(fresh, 'Hello?');
      assert.equal(result.stopReason, 'end_turn');
    } finally {
      await client.stop();
    }
  });

  it('the chat controller sets the tool policy and the model of the open session', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    const ctl = new ChatController({
      workspaceRoot: () => dirs.workspace,
      settings: () => ({ server: { command: PARLEY, args: ['serve'], env: serverEnv(fake!, dirs.home) } }),
    });
    try {
      await ctl.ensureSession();
      // With config options (second edition) or `_parley/session/configure` (first).
      await ctl.setConfigOption('tool_policy', 'sync');
      await ctl.selectModel(MODEL);
      assert.equal(ctl.state.meta.toolPolicy, 'sync');
      assert.equal(ctl.state.meta.model, MODEL);
      await fake!.script([{ text: 'Answered without streaming.' }]);
      assert.equal(await ctl.send('Hello?'), 'end_turn');
      const requests = await fake!.requests();
      assert.ok(requests.length > 0);
      assert.deepEqual(requests.map((r) => r.stream), requests.map(() => false), 'under sync no round is streamed');
      const last = ctl.state.entries[ctl.state.entries.length - 1];
      assert.equal(last.kind === 'agent' && last.text, 'Answered without streaming.');
      assert.ok(ctl.state.meta.usage.sessionTokens > 0, 'the session totals');
    } finally {
      await ctl.dispose();
    }
  });

  it('the chat controller answers read_file with the editor\'s unsaved text (fs/read_text_file)', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    const unsaved = 'def area(width, height):\n    return width * height  # UNSAVED IN THE EDITOR\n';
    const reads: string[] = [];
    const ctl = new ChatController({
      workspaceRoot: () => dirs.workspace,
      settings: () => ({ server: { command: PARLEY, args: ['serve'], env: serverEnv(fake!, dirs.home) } }),
      files: {
        read: (file) => {
          reads.push(file);
          return Promise.resolve(unsaved);
        },
        write: () => Promise.reject(new Error('no write expected')),
      },
    });
    try {
      await fake!.script([{ tool_calls: [{ name: 'read_file', arguments: { path: 'geometry.py' } }] }, { text: 'It multiplies.' }]);
      assert.equal(await ctl.send('What does area do?'), 'end_turn');
      assert.deepEqual(reads, [path.join(dirs.workspace, 'geometry.py')]);
      const second = (await fake!.requests()).find((r) => r.reply_index === 1);
      assert.match(JSON.stringify(second?.body.messages), /UNSAVED IN THE EDITOR/);
    } finally {
      await ctl.dispose();
    }
  });

  it('the chat controller: an edit asks with its diff, is written through the editor, and Undo turn restores it', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    const own = tempDirs();
    const file = path.join(own.workspace, 'geometry.py');
    const before = fs.readFileSync(file, 'utf8');
    const after = before.replace('return width * height', 'return float(width) * height');
    const writes: [string, string][] = [];
    const asked: { content: unknown; proposal: unknown }[] = [];
    const ctl: ChatController = new ChatController({
      workspaceRoot: () => own.workspace,
      settings: () => ({ server: { command: PARLEY, args: ['serve'], env: serverEnv(fake!, own.home) } }),
      // The editor: reads the file; a write lands in it and is saved (as VS Code does).
      files: {
        read: (f) => Promise.resolve(fs.readFileSync(f, 'utf8')),
        write: (f, content) => {
          writes.push([f, content]);
          fs.writeFileSync(f, content);
          return Promise.resolve();
        },
      },
      onPermissionAsked: (params) => {
        asked.push({ content: params.toolCall.content, proposal: ctl.proposedEdit(params.toolCall.toolCallId, file) });
        return Promise.resolve(params.options.find((o) => o.kind === 'allow_once')?.optionId ?? null);
      },
    });
    try {
      await fake!.script([
        { tool_calls: [{ name: 'read_file', arguments: { path: 'geometry.py' } }] },
        { tool_calls: [{ name: 'edit_file', arguments: { path: 'geometry.py', old_text: 'return width * height', new_text: 'return float(width) * height' } }] },
        { text: 'Done: width is a float now.' },
      ]);
      assert.equal(await ctl.send('Make width a float.'), 'end_turn');
      // Asked once, about the diff of the whole file; the proposal was there for "Open diff".
      assert.equal(asked.length, 1);
      assert.deepEqual(asked[0].content, [{ type: 'diff', path: file, oldText: before, newText: after }]);
      assert.deepEqual(asked[0].proposal, { toolCallId: (asked[0].proposal as { toolCallId: string }).toolCallId, file, oldText: before, newText: after });
      // Written through the editor, with the whole new text.
      assert.deepEqual(writes, [[file, after]]);
      assert.equal(fs.readFileSync(file, 'utf8'), after);
      const turn = ctl.state.entries.find((e) => e.kind === 'turn');
      assert.ok(turn?.kind === 'turn', 'the turn ends with Undo turn');
      assert.deepEqual([turn.turn, turn.files], [1, ['geometry.py']]);

      // Undo turn: the server puts the file back; the conversation stays.
      const result = await ctl.undoTurn();
      assert.deepEqual(result.files, [{ path: file, action: 'restored' }]);
      assert.equal(fs.readFileSync(file, 'utf8'), before, 'byte for byte');
      const undone = ctl.state.entries.find((e) => e.kind === 'turn');
      assert.ok(undone?.kind === 'turn');
      assert.equal(undone.undo, 'undone');
      const notice = ctl.state.entries.filter((e) => e.kind === 'notice').pop();
      // The server's words (`_parley/session/restore`'s `text`), as `/undo` says them.
      assert.equal(notice?.kind === 'notice' && notice.text, 'Restored the files of turn 1 as they were before it:\n- `geometry.py` restored');
      assert.ok(ctl.state.entries.some((e) => e.kind === 'agent' && e.text === 'Done: width is a float now.'));

      // Redo Turn: the undo undone, the server's report of each file in the chat.
      assert.equal(await ctl.redoTurn(), 'end_turn');
      assert.equal(fs.readFileSync(file, 'utf8'), after, 'the turn\'s result back');
      const report = ctl.state.entries.filter((e) => e.kind === 'agent').pop();
      assert.equal(report?.kind === 'agent' && report.text, 'Put back what turn 1 and the later turns did:\n- `geometry.py` restored');
    } finally {
      await ctl.dispose();
      own.cleanup();
    }
  });

  it('the chat controller keeps the config options and the slash commands, and a command runs', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    const ctl = new ChatController({
      workspaceRoot: () => dirs.workspace,
      settings: () => ({ server: { command: PARLEY, args: ['serve'], env: serverEnv(fake!, dirs.home) } }),
    });
    try {
      await ctl.ensureSession();
      const byId = () => new Map(ctl.state.meta.configOptions.map((o) => [o.id, o]));
      assert.equal(byId().get('model')?.category, 'model');
      assert.equal(byId().get('model')?.currentValue, MODEL);
      assert.equal(ctl.state.meta.model, MODEL);
      // The commands follow the answer to session/new.
      for (let i = 0; i < 200 && ctl.state.meta.commands.length === 0; i++) {
        await delay(10);
      }
      const names = ctl.state.meta.commands.map((c) => c.name);
      assert.ok(names.includes('model') && names.includes('cost'), names.join(', '));

      await ctl.setConfigOption('tool_policy', 'sync');
      assert.equal(byId().get('tool_policy')?.currentValue, 'sync', 'the options set_config_option answers');
      assert.equal(ctl.state.meta.toolPolicy, 'sync');

      // A slash command runs in the server; the model option changes with it (config_option_update).
      await fake!.script([]);
      assert.equal(await ctl.send('/model openai:gpt-4.1'), 'end_turn');
      const last = ctl.state.entries[ctl.state.entries.length - 1];
      assert.match(last.kind === 'agent' ? last.text : '', /openai:gpt-4\.1/);
      assert.equal(ctl.state.meta.model, 'openai:gpt-4.1');
      assert.equal(byId().get('model')?.currentValue, 'openai:gpt-4.1');
      assert.deepEqual(await fake!.requests(), [], 'no model call');
    } finally {
      await ctl.dispose();
    }
  });

  it('the chat controller: the mode shown and switched (session/set_mode, /mode), the plan live and replayed on load (issue 25)', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    const settings = () => ({ server: { command: PARLEY, args: ['serve'], env: serverEnv(fake!, dirs.home) } });
    const ctl = new ChatController({ workspaceRoot: () => dirs.workspace, settings });
    const PLAN = [
      { content: 'Run the tests', status: 'completed', priority: 'high' },
      { content: 'Fix the failing test', status: 'in_progress', priority: 'medium' },
    ];
    try {
      const sessionId = await ctl.ensureSession();
      assert.equal(ctl.state.meta.mode?.currentModeId, 'ask');
      assert.deepEqual(ctl.state.meta.mode?.modes.map((m) => m.id), ['ask', 'accept_edits', 'plan']);
      assert.deepEqual(ctl.state.meta.mode?.via, { method: 'set_mode' });

      await ctl.setMode('plan');
      assert.equal(ctl.state.meta.mode?.currentModeId, 'plan');
      await fake!.script([{ tool_calls: [{ name: 'update_plan', arguments: { entries: PLAN } }] }, { text: 'Planned.' }]);
      assert.equal(await ctl.send('Plan the fix.'), 'end_turn');
      assert.deepEqual(ctl.state.meta.plan, PLAN, 'the plan shown as the model wrote it');

      await fake!.script([]);
      await ctl.send('/mode accept_edits');
      assert.equal(ctl.state.meta.mode?.currentModeId, 'accept_edits', 'the server\'s current_mode_update');

      // A new session has no plan and keeps the mode (issue 43); loading the first one again
      // replays its plan, its stored mode shown.
      await ctl.newSession();
      assert.equal(ctl.state.meta.plan, undefined);
      assert.equal(ctl.state.meta.mode?.currentModeId, 'accept_edits', 'the mode kept for a new chat');
      await ctl.setMode('ask');
      await ctl.loadSession(sessionId);
      assert.deepEqual(ctl.state.meta.plan, PLAN);
      assert.equal(ctl.state.meta.mode?.currentModeId, 'accept_edits');
    } finally {
      await ctl.dispose();
    }
  });

  it('the chat controller gives the workspace\'s other folders as additionalDirectories: the model reads a file there (issue 25)', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    const other = fs.mkdtempSync(path.join(path.dirname(dirs.workspace), 'other-root-'));
    fs.writeFileSync(path.join(other, 'notes.txt'), 'The other root says hello.\n');
    const ctl = new ChatController({
      workspaceRoot: () => dirs.workspace,
      additionalDirectories: () => [other],
      settings: () => ({ server: { command: PARLEY, args: ['serve'], env: serverEnv(fake!, dirs.home) } }),
    });
    try {
      await ctl.ensureStarted();
      assert.ok(ctl.client?.sessionCapabilities.additionalDirectories, 'the server advertises additionalDirectories');
      await ctl.ensureSession();
      const notes = path.join(other, 'notes.txt');
      await fake!.script([{ tool_calls: [{ name: 'read_file', arguments: { path: notes } }] }, { text: 'It says hello.' }]);
      assert.equal(await ctl.send('What do the notes in the other folder say?'), 'end_turn');
      const card = ctl.state.entries.find((e) => e.kind === 'tool');
      assert.equal(card?.kind === 'tool' && card.status, 'completed', JSON.stringify(card));
      assert.match(card?.kind === 'tool' ? (card.output ?? '') : '', /The other root says hello\./);
    } finally {
      await ctl.dispose();
    }
  });

  it('the chat controller recovers: restart resumes the session (or reloads it into the view)', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    const ctl = new ChatController({
      workspaceRoot: () => dirs.workspace,
      settings: () => ({ server: { command: PARLEY, args: ['serve'], env: serverEnv(fake!, dirs.home) } }),
    });
    try {
      await fake!.script([{ text: 'First answer.' }]);
      await ctl.send('First question');
      const sessionId = ctl.sessionId!;
      assert.ok(sessionId);
      assert.deepEqual(
        ctl.state.entries.map((e) => e.kind),
        ['user', 'agent'],
      );
      assert.equal(ctl.state.meta.usage.inputTokens, 10, 'the session usage');

      process.kill(ctl.client!.pid!, 'SIGKILL');
      await new Promise((resolve) => ctl.client!.once('exit', resolve));
      assert.equal(ctl.state.meta.serverState, 'exited');
      const notice = ctl.state.entries[ctl.state.entries.length - 1];
      assert.equal(notice.kind, 'notice');
      assert.match(notice.kind === 'notice' ? notice.text : '', /stopped unexpectedly/);

      await ctl.restart();
      assert.equal(ctl.state.meta.serverState, 'ready');
      const texts = ctl.state.entries.map((e) => `${e.kind}:${'text' in e ? e.text : ''}`);
      assert.equal(ctl.sessionId, sessionId, 'the same session');
      if (ctl.client!.sessionCapabilities.resume) {
        // session/resume: no replay, the view kept as it was.
        assert.deepEqual(texts, [
          'user:First question',
          'agent:First answer.',
          'notice:The Parley server stopped unexpectedly (signal SIGKILL).',
          'notice:Server restarted; session resumed.',
        ]);
      } else {
        // session/load: the history replayed into a cleared view.
        assert.deepEqual(texts, ['user:First question', 'agent:First answer.', 'notice:Server restarted; session reloaded.']);
      }
      assert.equal(ctl.state.meta.usage.inputTokens, 10, 'the session usage after the restart');

      await fake!.script([{ text: 'x' }, { text: 'Second answer.' }]);
      const stop = await ctl.send('Second question');
      assert.equal(stop, 'end_turn');
      const last = ctl.state.entries[ctl.state.entries.length - 1];
      assert.equal(last.kind === 'agent' && last.text, 'Second answer.');
    } finally {
      await ctl.dispose();
    }
  });

  it('a turn cancelled in one chat shows "Stopped." once after a load in another, with or without its kept notice', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    const kept = new Map<string, KeptNotice[]>();
    const keeper: NoticeKeeper = { get: (id) => kept.get(id) ?? [], set: (id, notices) => void kept.set(id, notices) };
    const chat = (notices: NoticeKeeper) =>
      new ChatController({
        workspaceRoot: () => dirs.workspace,
        settings: () => ({ server: { command: PARLEY, args: ['serve'], env: serverEnv(fake!, dirs.home) } }),
        notices,
      });
    const stops = (ctl: ChatController) => ctl.state.entries.filter((e) => e.kind === 'notice' && e.text === 'Stopped.').length;
    const first = chat(keeper);
    let sessionId: string;
    try {
      await fake!.script([{ text: LONG_TEXT, chunk_size: 4, pacing: { chunks_per_second: 20 } }]);
      const turn = first.send('Tell me a long story.');
      while (!first.state.entries.some((e) => e.kind === 'agent' && e.text.length > 0)) {
        await delay(20);
      }
      await first.cancel();
      assert.equal(await turn, 'cancelled');
      assert.equal(stops(first), 1);
      sessionId = first.sessionId!;
      assert.equal(kept.get(sessionId)?.length ?? 0, 0, 'the server replays its notice: the chat keeps none');
    } finally {
      await first.dispose();
    }
    // Another window (an empty workspace state, or the same): the notice comes from the replay, once.
    for (const notices of [{ get: () => [], set: () => undefined }, keeper]) {
      const other = chat(notices);
      try {
        await other.loadSession(sessionId);
        const kinds = other.state.entries.map((e) => (e.kind === 'notice' ? e.text : e.kind));
        assert.deepEqual(kinds, ['user', 'agent', 'Stopped.'], notices === keeper ? 'with the kept notice' : 'without it');
      } finally {
        await other.dispose();
      }
    }
  });
});
