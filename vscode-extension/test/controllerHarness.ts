/**
 * What the controller tests share (controllerSession, controllerEdits, controllerNotices): a
 * server's usage and initialize answers as a scripted stand-in server (`peer.ts`) sends them,
 * and a controller on such a peer.
 */

import * as os from 'node:os';

import { ChatController } from '../src/core/controller';
import { Peer, type PeerScript } from './peer';

export const USAGE = { inputTokens: 12, outputTokens: 3, totalTokens: 15 };
export const TURN = { rounds: 1, streamedRounds: 1, syncFallbacks: 0, discardedStreams: 0, toolCalls: 0, cost: null, model: 'openai:a' };
export const SESSION = { inputTokens: 120, outputTokens: 30, totalTokens: 150, cost: { amount: 0.25, currency: 'USD' }, turns: 4, rounds: 5 };

export const INITIALIZE = {
  result: {
    protocolVersion: 1,
    agentCapabilities: { loadSession: true },
    _meta: {
      parley: {
        defaultModel: 'openai:a',
        models: [
          { id: 'openai:a', provider: 'openai', available: true },
          { id: 'openai:b', provider: 'openai', available: true },
        ],
      },
    },
  },
};

/** A controller on `peer`; its log goes to the peer (which reads what it received from it). */
export function controllerOn(peer: Peer): ChatController {
  return new ChatController({
    workspaceRoot: () => os.tmpdir(),
    settings: () => ({ server: peer.server, toolPolicy: 'hybrid' }),
    log: (line) => peer.log.push(line),
  });
}

export async function withController(script: PeerScript, fn: (ctl: ChatController, peer: Peer) => Promise<void>): Promise<void> {
  const peer = new Peer(script);
  const ctl = controllerOn(peer);
  try {
    await fn(ctl, peer);
  } finally {
    await ctl.dispose();
  }
}

/** A text content block. */
export const text = (t: string) => ({ type: 'text', text: t });
