/**
 * A scripted stand-in server (Node, vscode-jsonrpc) for what the real `parley serve` on main
 * does not do yet (the second edition of the contract: `session/resume`, `session/close`,
 * `session/set_config_option`, …) or never does (an unknown update kind). It answers each
 * method from a script, sends the script's updates around the answer, and reports every
 * message it receives as a `RECV {json}` line on stderr, which the client passes on as a log
 * line; `Peer.received` reads them back.
 */

import { ParleyClient, type ClientOptions } from '../src/client/client';

/** How the peer answers one method. */
export interface PeerAnswer {
  /** The result; in it, the string `$session` stands for the session's id (a new one for `session/new`). */
  result?: unknown;
  /** A JSON-RPC error instead of a result. */
  error?: { code: number; message: string };
  /** `session/update` params sent before the answer (`$session` as above). */
  before?: unknown[];
  /** … and after it. */
  after?: unknown[];
  /**
   * Requests the peer sends the client before it answers (after `before`), one at a time
   * (`$session` as above); each answer (`{result}` or `{error}`) is reported as an
   * `ANSWER {method, result | error}` line (see `Peer.answers`).
   */
  requests?: { method: string; params: unknown }[];
}

/** How the peer answers each method; a list: the answers to its calls in turn (the last one for the calls after). */
export type PeerScript = Record<string, PeerAnswer | PeerAnswer[]>;

const PEER = `
const rpc = require(${JSON.stringify(require.resolve('vscode-jsonrpc/node'))});
const script = JSON.parse(process.argv[1]);
const conn = rpc.createMessageConnection(
  new rpc.StreamMessageReader(process.stdin),
  new rpc.StreamMessageWriter(process.stdout),
);
let sessions = 0;
const calls = {};
const fill = (value, id) => JSON.parse(JSON.stringify(value ?? null).split('"$session"').join(JSON.stringify(id)));
conn.onRequest((method, params) => {
  process.stderr.write('RECV ' + JSON.stringify({ method, params }) + '\\n');
  const answers = [].concat(script[method] ?? []);
  calls[method] = (calls[method] ?? 0) + 1;
  const answer = answers[Math.min(calls[method], answers.length) - 1];
  if (!answer) {
    return new rpc.ResponseError(-32601, 'Method not found: ' + method);
  }
  // Session ids stay unique across the peer's restarts.
  const id = method === 'session/new' ? 's' + ++sessions + '-' + process.pid : (params && params.sessionId) || 's0';
  return (async () => {
    for (const u of answer.before || []) await conn.sendNotification('session/update', fill(u, id));
    for (const r of answer.requests || []) {
      let reply;
      try {
        reply = { result: await conn.sendRequest(r.method, fill(r.params, id)) };
      } catch (e) {
        reply = { error: { code: e.code, message: e.message } };
      }
      process.stderr.write('ANSWER ' + JSON.stringify({ method: r.method, ...reply }) + '\\n');
    }
    if (answer.after) {
      setTimeout(async () => {
        for (const u of answer.after) await conn.sendNotification('session/update', fill(u, id));
      }, 0);
    }
    if (answer.error) return new rpc.ResponseError(answer.error.code, answer.error.message);
    return fill(answer.result ?? {}, id);
  })();
});
conn.onNotification((method, params) => {
  process.stderr.write('RECV ' + JSON.stringify({ method, params }) + '\\n');
});
process.stdin.on('end', () => process.exit(0));
conn.listen();
`;

export interface Received {
  method: string;
  params: Record<string, unknown>;
}

export interface PeerReply {
  method: string;
  result?: unknown;
  error?: { code: number; message: string };
}

export class Peer {
  readonly log: string[] = [];

  constructor(readonly script: PeerScript) {}

  /** The server options that run this peer. */
  get server(): ClientOptions['server'] {
    return { command: process.execPath, args: ['-e', PEER, JSON.stringify(this.script)] };
  }

  /** A client of this peer whose log lines are kept. */
  client(options: Omit<ClientOptions, 'server'> = {}): ParleyClient {
    const client = new ParleyClient({ ...options, server: this.server });
    this.listen(client);
    return client;
  }

  listen(client: ParleyClient): void {
    client.on('log', (line) => this.log.push(line));
  }

  /** What the peer received, in order (optionally only `method`'s). */
  received(method?: string): Received[] {
    return this.log
      .filter((line) => line.startsWith('RECV '))
      .map((line) => JSON.parse(line.slice(5)) as Received)
      .filter((r) => method === undefined || r.method === method);
  }

  /** The client's answers to the peer's requests, in order (optionally only `method`'s). */
  answers(method?: string): PeerReply[] {
    return this.log
      .filter((line) => line.startsWith('ANSWER '))
      .map((line) => JSON.parse(line.slice(7)) as PeerReply)
      .filter((r) => method === undefined || r.method === method);
  }

  /** Waits until the peer has received `method` `count` times. */
  async waitFor(method: string, count = 1, timeoutMs = 5000): Promise<Received[]> {
    const end = Date.now() + timeoutMs;
    while (this.received(method).length < count) {
      if (Date.now() > end) {
        throw new Error(`the peer did not receive ${method} ×${count}: ${this.received().map((r) => r.method).join(', ')}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    return this.received(method);
  }
}
