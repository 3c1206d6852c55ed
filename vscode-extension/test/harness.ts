/**
 * Test harness: the fake LLM (`python -m parley.fakellm`) and the real `parley serve`,
 * both from the project's virtualenv (`PARLEY_VENV`, default `<repo>/.venv`).
 */

import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';

import { ParleyClient, type ClientHandlers } from '../src/client/client';
import type { SessionNotification, SessionUpdate, ToolSpec } from '../src/client/protocol';

export const REPO = path.resolve(__dirname, '..', '..', '..');
export const VENV = process.env.PARLEY_VENV ?? path.join(REPO, '.venv');
export const PYTHON = path.join(VENV, 'bin', 'python');
export const PARLEY = path.join(VENV, 'bin', 'parley');
export const MODEL = 'openai:gpt-4.1-mini';

export interface FakeReply {
  text?: string;
  thinking?: string;
  tool_calls?: { name: string; arguments?: Record<string, unknown>; id?: string }[];
  finish_reason?: string;
  usage?: [number, number] | null;
  chunk_size?: number;
  chunks?: string[];
  pacing?: { first_token_delay?: number; chunks_per_second?: number };
  fault?: Record<string, unknown>;
  sync?: FakeReply;
}

export interface RecordedRequest {
  path: string;
  api: string;
  stream: boolean;
  body: { messages?: { role: string; content?: unknown; tool_calls?: unknown }[]; [k: string]: unknown };
  reply_index: number;
  client_hung_up: boolean;
  status: number;
}

export class FakeLLM {
  private constructor(
    readonly url: string,
    private readonly proc: ChildProcess,
  ) {}

  static async start(): Promise<FakeLLM> {
    const proc = spawn(PYTHON, ['-m', 'parley.fakellm', '--port', '0', '--exit-on-stdin-eof'], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const rl = readline.createInterface({ input: proc.stdout });
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`fakellm did not start:\n${stderr}`)), 15000);
      rl.once('line', (line) => {
        clearTimeout(timer);
        resolve(line.trim());
      });
      proc.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`fakellm exited (${code}):\n${stderr}`));
      });
    });
    return new FakeLLM(url, proc);
  }

  async script(replies: FakeReply[]): Promise<void> {
    const res = await fetch(`${this.url}/_fake/script`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(replies),
    });
    if (!res.ok) {
      throw new Error(`fakellm script rejected: ${res.status} ${await res.text()}`);
    }
  }

  async requests(): Promise<RecordedRequest[]> {
    const res = await fetch(`${this.url}/_fake/requests`);
    return (await res.json()) as RecordedRequest[];
  }

  async stop(): Promise<void> {
    if (this.proc.exitCode !== null) {
      return;
    }
    const exited = new Promise((resolve) => this.proc.once('exit', resolve));
    this.proc.stdin!.end();
    this.proc.kill('SIGTERM');
    await exited;
  }
}

/** `parley export SESSION` on the store in `home`: the Markdown the command line prints for it (without print's line end). */
export function cliExport(sessionId: string, home: string): string {
  return execFileSync(PARLEY, ['export', sessionId], { encoding: 'utf8', env: { ...process.env, PARLEY_HOME: home } }).replace(/\n$/, '');
}

/** A fresh store directory and workspace for one server. */
export function tempDirs(): { home: string; workspace: string; cleanup: () => void } {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'parley-vscode-test-'));
  const home = path.join(base, 'home');
  const workspace = path.join(base, 'workspace');
  fs.mkdirSync(home);
  fs.mkdirSync(workspace);
  fs.writeFileSync(
    path.join(workspace, 'geometry.py'),
    'def area(width, height):\n    """The area of a rectangle."""\n    return width * height\n',
  );
  return { home, workspace, cleanup: () => fs.rmSync(base, { recursive: true, force: true }) };
}

export function serverEnv(fake: FakeLLM, home: string): Record<string, string> {
  return {
    OPENAI_BASE_URL: `${fake.url}/v1`,
    OPENAI_API_KEY: 'test-key',
    PARLEY_MODEL: MODEL,
    PARLEY_HOME: home,
    // Keep the test's own provider keys out of the server.
    ANTHROPIC_API_KEY: '',
  };
}

export function makeClient(
  fake: FakeLLM,
  dirs: { home: string; workspace: string },
  options: { handlers?: ClientHandlers; tools?: ToolSpec[] } = {},
): ParleyClient {
  return new ParleyClient({
    server: { command: PARLEY, args: ['serve'], cwd: dirs.workspace, env: serverEnv(fake, dirs.home) },
    tools: options.tools,
    handlers: options.handlers,
    clientInfo: { name: 'parley-vscode-test', version: '0.0.0' },
  });
}

/** Collects a client's `session/update`s. */
export class Updates {
  readonly all: SessionNotification[] = [];
  private waiters: { pred: (n: SessionNotification) => boolean; resolve: (n: SessionNotification) => void }[] = [];

  constructor(client: ParleyClient) {
    client.on('update', (n) => {
      this.all.push(n);
      this.waiters = this.waiters.filter((w) => {
        if (w.pred(n)) {
          w.resolve(n);
          return false;
        }
        return true;
      });
    });
  }

  of<K extends SessionUpdate['sessionUpdate']>(kind: K, sessionId?: string): Extract<SessionUpdate, { sessionUpdate: K }>[] {
    return this.all
      .filter((n) => !sessionId || n.sessionId === sessionId)
      .map((n) => n.update)
      .filter((u): u is Extract<SessionUpdate, { sessionUpdate: K }> => u.sessionUpdate === kind);
  }

  text(kind: 'agent_message_chunk' | 'agent_thought_chunk' | 'user_message_chunk', sessionId?: string): string {
    return this.of(kind, sessionId)
      .map((u) => ((u.content as { text?: string } | undefined)?.text ?? ''))
      .join('');
  }

  waitFor(pred: (n: SessionNotification) => boolean, timeoutMs = 10000): Promise<SessionNotification> {
    const found = this.all.find(pred);
    if (found) {
      return Promise.resolve(found);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('timed out waiting for a session/update')), timeoutMs);
      this.waiters.push({
        pred,
        resolve: (n) => {
          clearTimeout(timer);
          resolve(n);
        },
      });
    });
  }

  clear(): void {
    this.all.length = 0;
  }
}

/**
 * Whether the real server is installed: the `parley` executable and the `parley.server`
 * module exist in the virtualenv. Returns a reason to skip, or undefined when the server
 * tests must run (and pass). A server that is installed but broken fails the tests.
 */
export function serverUnavailable(): Promise<string | undefined> {
  if (!fs.existsSync(PARLEY) || !fs.existsSync(PYTHON)) {
    return Promise.resolve(`Parley server not installed (no ${PARLEY}); set PARLEY_VENV to the project's virtualenv`);
  }
  if (process.env.PARLEY_REQUIRE_SERVER === '1') {
    return Promise.resolve(undefined);
  }
  return new Promise((resolve) => {
    const probe = spawn(PYTHON, ['-c', 'import importlib.util, sys; sys.exit(0 if importlib.util.find_spec("parley.server") else 3)'], {
      stdio: 'ignore',
    });
    probe.on('error', (err) => resolve(`cannot run ${PYTHON}: ${err.message}`));
    probe.on('exit', (code) =>
      resolve(code === 0 ? undefined : `Parley server not installed yet (no parley.server module in ${VENV})`),
    );
  });
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `fn` every 25 ms until it returns a value; fails after `timeoutMs`, naming `what`. */
export async function until<T>(fn: () => T | undefined, what: string, timeoutMs = 15000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = fn();
    if (v !== undefined) {
      return v;
    }
    if (Date.now() > end) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await delay(25);
  }
}
